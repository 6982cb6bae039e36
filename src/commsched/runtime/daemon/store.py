"""The daemon's durable state: one SQLite file in WAL mode, every change one transaction.

Tables: ``meta`` (the cluster configuration), ``jobs``, ``hosts``, ``profiles``, ``decisions``
(version, time, cause, document) and ``events`` (an append-only log). A mutation of the daemon writes
its event, the changed rows and the new decision in a single ``BEGIN IMMEDIATE ... COMMIT``, so a
daemon killed at any instant comes back either before or after the whole change (``synchronous=FULL``:
a committed transaction survives the process and the machine).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commsched.runtime.daemon.records import ClusterConfig, JobRecord
from commsched.runtime.daemon.shapes import EventJSON
from commsched.runtime.protocol.control_json import CauseJSON, HostJSON

__all__ = ["DecisionRow", "Store"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS hosts (name TEXT PRIMARY KEY, body TEXT NOT NULL, seen_s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS profiles (job TEXT PRIMARY KEY, body TEXT NOT NULL, updated_s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS decisions (
    version INTEGER PRIMARY KEY, created_s REAL NOT NULL, cause TEXT NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, at_s REAL NOT NULL, kind TEXT NOT NULL, job TEXT,
    body TEXT NOT NULL);
"""

#: layout version of the database, kept in ``meta``
SCHEMA_VERSION = 1


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionRow:
    """One stored decision: its version, when it was made, why, and the document."""

    version: int
    created_s: float
    cause: CauseJSON
    body: str


class Store:
    """The SQLite file behind one daemon. Thread-safe: one connection behind a lock.

    Parameters
    ----------
    path
        The database file (created with its tables when missing).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=5000")
        with self.atomic():
            for stmt in filter(str.strip, _SCHEMA.split(";")):
                self._db.execute(stmt)
            self._db.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One transaction: everything inside commits together or not at all."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # ------------------------------------------------------------------------------------ cluster
    def config(self) -> ClusterConfig | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'cluster'").fetchone()
        return ClusterConfig.from_json(json.loads(row[0])) if row else None

    def put_config(self, cfg: ClusterConfig) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('cluster', ?)", (_dumps(cfg.to_json()),)
        )

    # --------------------------------------------------------------------------------------- jobs
    def jobs(self) -> list[JobRecord]:
        with self._lock:
            rows = self._db.execute("SELECT body FROM jobs ORDER BY id").fetchall()
        return [JobRecord.from_json(json.loads(r[0])) for r in rows]

    def put_job(self, job: JobRecord) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO jobs(id, body) VALUES (?, ?)", (job.id, _dumps(job.to_json()))
        )
        if job.profile is not None:
            self._db.execute(
                "INSERT OR REPLACE INTO profiles(job, body, updated_s) VALUES (?, ?, ?)",
                (job.id, _dumps(job.profile.to_json()), job.started_s),
            )

    def delete_job(self, job_id: str) -> None:
        self._db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
        self._db.execute("DELETE FROM profiles WHERE job = ?", (job_id,))

    # -------------------------------------------------------------------------------------- hosts
    def hosts(self) -> dict[str, HostJSON]:
        with self._lock:
            rows = self._db.execute("SELECT name, body FROM hosts ORDER BY name").fetchall()
        return {r[0]: json.loads(r[1]) for r in rows}

    def put_host(self, name: str, body: HostJSON, seen_s: float) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO hosts(name, body, seen_s) VALUES (?, ?, ?)", (name, _dumps(body), seen_s)
        )

    # ---------------------------------------------------------------------------------- decisions
    def latest_decision(self) -> DecisionRow | None:
        with self._lock:
            row = self._db.execute(
                "SELECT version, created_s, cause, body FROM decisions ORDER BY version DESC LIMIT 1"
            ).fetchone()
        return _decision(row)

    def decision(self, version: int) -> DecisionRow | None:
        with self._lock:
            row = self._db.execute(
                "SELECT version, created_s, cause, body FROM decisions WHERE version = ?", (version,)
            ).fetchone()
        return _decision(row)

    def history(self, limit: int) -> list[DecisionRow]:
        """The last ``limit`` decisions, newest first (documents left out: ``body`` is empty)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT version, created_s, cause, '' FROM decisions ORDER BY version DESC LIMIT ?", (limit,)
            ).fetchall()
        return [d for d in map(_decision, rows) if d is not None]

    def put_decision(self, version: int, created_s: float, cause: CauseJSON, body: str) -> None:
        self._db.execute(
            "INSERT INTO decisions(version, created_s, cause, body) VALUES (?, ?, ?, ?)",
            (version, created_s, _dumps(cause), body),
        )

    # ------------------------------------------------------------------------------------- events
    def add_event(self, at_s: float, kind: str, job: str | None, body: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT INTO events(at_s, kind, job, body) VALUES (?, ?, ?, ?)", (at_s, kind, job, _dumps(body))
        )

    def events(self, after: int, limit: int) -> list[EventJSON]:
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, at_s, kind, job, body FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                (after, limit),
            ).fetchall()
        return [
            {"seq": r[0], "at_s": r[1], "kind": r[2], "job": r[3], "detail": json.loads(r[4])} for r in rows
        ]


def _decision(row: Any) -> DecisionRow | None:
    if row is None:
        return None
    return DecisionRow(
        version=int(row[0]), created_s=float(row[1]), cause=json.loads(row[2]), body=str(row[3])
    )
