"""The daemon's behaviour: job events in, a new decision version out, all of it durable.

:class:`DaemonService` owns the state (in memory, mirrored in the :class:`Store`). Every event that
changes the cluster — job start, job end, profile update, heartbeat timeout, end of a profiling
window, cluster change — is one call that (1) decides with :func:`decide` on the new job set, then
(2) writes the event, the changed rows and the new decision in one transaction, then (3) publishes the
version to listeners (the HTTP layer's long-poll waiters). A failed decision writes nothing.

A restarted service reads everything back and decides nothing: the latest stored decision stays the
current one until the next event. Heartbeats are kept in memory only; after a restart every job gets
a fresh heartbeat deadline (the daemon being away is not the jobs' fault).
"""

from __future__ import annotations

import ipaddress
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from commsched.runtime.daemon.cluster import build_cluster, check_host, check_names
from commsched.runtime.daemon.decide import decision
from commsched.runtime.daemon.jobrequest import JobRequest, StateConflictError, UnknownJobError, resolve_job
from commsched.runtime.daemon.records import ClusterConfig, JobRecord, ProfileRecord
from commsched.runtime.daemon.shapes import HostListedJSON
from commsched.runtime.daemon.store import Store
from commsched.runtime.protocol.control import Cause, Decision, HostView
from commsched.runtime.protocol.control_json import DecisionJSON, HostJSON
from commsched.scheduling.memo import Memo
from commsched.topology import Topology

__all__ = ["DaemonService"]


class DaemonService:
    """State and behaviour of one scheduling daemon.

    Parameters
    ----------
    store
        The SQLite store; its contents (if any) are the state to resume from.
    default
        The configuration used when the store has none yet (first start).
    clock
        Wall-clock seconds (``time.time``); tests pass a fake one.
    """

    def __init__(
        self, store: Store, *, default: ClusterConfig, clock: Callable[[], float] = time.time
    ) -> None:
        self.store = store
        self.clock = clock
        self._lock = threading.RLock()
        self._listeners: list[Callable[[int], None]] = []
        self._observers: list[Callable[[Cause, float], None]] = []
        #: jobs removed because their heartbeat timed out, since this process started
        self.missed_heartbeats = 0
        stored = store.config()
        self._cfg = stored or default
        check_names(self._cfg)
        self._topo = build_cluster(self._cfg)
        if stored is None:
            with store.atomic():
                store.put_config(self._cfg)
                store.add_event(clock(), "daemon-init", None, {"cluster": self._cfg.to_json()})
        self._jobs = {j.id: j for j in store.jobs()}
        self._hosts = store.hosts()
        self._counters: dict[str, dict[str, float]] = {}
        self._views: dict[str, str] = {}
        self.warmed = False
        self._memos: dict[int, Memo] = {}
        self._memo_jobs: dict[str, JobRecord] = {}
        self._memo_key: tuple[str, int, str] | None = None
        self._ports: dict[tuple[str, str, int], int] = {}
        self._ports_topo: Topology | None = None
        now = clock()
        self._beats = dict.fromkeys(self._jobs, now)
        latest = store.latest_decision()
        self._version = latest.version if latest else 0
        self._body = latest.body if latest else ""
        self._decision = (
            Decision.from_json(json.loads(self._body))
            if self._body
            else Decision(version=0, policy=self._cfg.policy)
        )
        with store.atomic():
            store.add_event(now, "daemon-start", None, {"version": self._version, "jobs": sorted(self._jobs)})

    # ------------------------------------------------------------------------------------- reads
    @property
    def config(self) -> ClusterConfig:
        return self._cfg

    @property
    def topology(self) -> Topology | None:
        return self._topo

    @property
    def version(self) -> int:
        return self._version

    def latest_body(self) -> str:
        """The current decision document as stored (JSON text; ``""`` before the first decision)."""
        return self._body

    def latest_doc(self) -> DecisionJSON:
        """The current decision document (a version 0 without jobs before the first decision)."""
        return self._decision.to_json()

    @property
    def decision(self) -> Decision:
        """The current decision, typed (version 0 and no job before the first one)."""
        return self._decision

    def jobs(self) -> list[JobRecord]:
        return sorted(self._jobs.values(), key=lambda j: (j.started_s, j.id))

    def job(self, job_id: str) -> JobRecord:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise UnknownJobError(f"no running job {job_id!r}", where="job_id") from None

    def hosts(self) -> dict[str, HostListedJSON]:
        return {
            name: {"nics": body["nics"], "agent": body["agent"], "counters": self._counters.get(name)}
            for name, body in self._hosts.items()
        }

    def heartbeat_age_s(self, job_id: str) -> float:
        return self.clock() - self._beats.get(job_id, self.clock())

    def nic_ips(self) -> dict[str, str]:
        """NIC id -> IP: what agents registered, else the topology's own address."""
        out: dict[str, str] = {}
        if self._topo is not None:
            for h in self._topo.hosts:
                for nic in h.nics:
                    ip = self._topo.node(nic).ip
                    if ip is not None:
                        out[str(nic)] = str(ipaddress.IPv4Address(ip))
        for body in self._hosts.values():
            for card in body["nics"]:
                if card["ip"]:
                    out[card["id"]] = card["ip"]
        return out

    def host_view(self, host: str) -> HostView:
        """The current decision restricted to the jobs and connections of one host, with NIC IPs."""
        return HostView.of(self._decision, host, self.nic_ips())

    def host_view_body(self, host: str) -> str:
        """:meth:`host_view` as JSON text, cached until the next decision or host registration."""
        with self._lock:
            body = self._views.get(host)
            if body is None:
                body = json.dumps(self.host_view(host).to_json(), separators=(",", ":"))
                self._views[host] = body
            return body

    def add_listener(self, fn: Callable[[int], None]) -> None:
        """``fn(version)`` runs after each new decision is committed (from the committing thread)."""
        self._listeners.append(fn)

    def add_decision_observer(self, fn: Callable[[Cause, float], None]) -> None:
        """``fn(cause, seconds)`` runs after each committed decision: its cause and how long deciding
        took (the policy's computation, wall-clock seconds; storing it is not counted)."""
        self._observers.append(fn)

    # --------------------------------------------------------------------------------- mutations
    def _memo_for(self, cfg: ClusterConfig, topo: Topology, jobs: dict[str, JobRecord]) -> Memo:
        """The policy's memo for this decision (one per priority-level count).

        The scheduling layer keys per-job values by job id (``("flows", id)``, ``("facts", id, ...)``,
        ``("solo", id, ...)``) and keeps Crux's greedy trail by job id and weight; values keyed by the
        numbers themselves (correction factors) stay valid. When the record behind a known id changes (a
        profile update, an id reused after its job ended) that job's values and the trail are discarded;
        a change of cluster, policy or seed drops the memos altogether.
        """
        key = (cfg.policy, cfg.seed, json.dumps(cfg.topology, sort_keys=True))
        if key != self._memo_key:
            self._memos, self._memo_jobs, self._memo_key = {}, {}, key
        changed = {j for j, r in jobs.items() if self._memo_jobs.get(j, r) != r}
        if changed:

            def stale(k: object) -> bool:
                return isinstance(k, tuple) and len(k) > 1 and (k[0] == "greedy-trail" or k[1] in changed)

            for memo in self._memos.values():
                memo.discard(stale)
        if topo is not self._ports_topo:
            self._ports, self._ports_topo = {}, topo
        self._memo_jobs.update(jobs)
        reserve = any(j.profiling for j in jobs.values()) and cfg.priority_levels >= 2
        levels = cfg.priority_levels - 1 if reserve else cfg.priority_levels
        return self._memos.setdefault(levels, Memo())

    def _decide(
        self,
        cfg: ClusterConfig,
        topo: Topology | None,
        jobs: dict[str, JobRecord],
        version: int,
        cause: Cause,
    ) -> Decision:
        """The decision for ``jobs`` (one without jobs while no topology is set)."""
        if topo is None:
            return Decision(version=version, policy=cfg.policy, cause=cause)
        memo = self._memo_for(cfg, topo, jobs)
        made = decision(
            topo, cfg, list(jobs.values()), version=version, cause=cause, memo=memo, port_cache=self._ports
        )
        self.warmed = True  # any decision fills the caches
        return made

    def _commit(
        self,
        jobs: dict[str, JobRecord],
        events: Sequence[tuple[str, str | None, dict[str, Any]]],
        cause: Cause,
        *,
        cfg: ClusterConfig | None = None,
        topo: Topology | None = None,
    ) -> int:
        """Decide for ``jobs`` and store events, job rows and decision in one transaction."""
        cfg = cfg or self._cfg
        topo = topo or self._topo
        version = self._version + 1
        now = self.clock()
        started = time.perf_counter()
        made = self._decide(cfg, topo, jobs, version, cause)
        took_s = time.perf_counter() - started
        made = replace(made, created_s=now)
        doc = made.to_json()
        body = json.dumps(doc, separators=(",", ":"))
        with self.store.atomic():
            if cfg is not self._cfg:
                self.store.put_config(cfg)
            for jid in set(self._jobs) - set(jobs):
                self.store.delete_job(jid)
            for jid, rec in jobs.items():
                if self._jobs.get(jid) != rec:
                    self.store.put_job(rec)
            for kind, job, detail in events:
                self.store.add_event(now, kind, job, {**detail, "version": version})
            self.store.put_decision(version, now, cause.to_json(), body)
        self._cfg, self._topo = cfg, topo
        for jid in set(jobs) - set(self._jobs):
            self._beats[jid] = now
        for jid in set(self._jobs) - set(jobs):
            self._beats.pop(jid, None)
        self._jobs = dict(jobs)
        self._version, self._body, self._decision = version, body, made
        self._views = {}
        for fn in self._listeners:
            fn(version)
        for observe in self._observers:
            observe(cause, took_s)
        return version

    def warm(self) -> None:
        """Fill the policy memo and the port cache for the current jobs; stores and publishes nothing.

        A restarted daemon runs this in the background so the first event after a restart does not pay
        for the caches (path table, correction factors, source-port searches) on its own.
        """
        with self._lock:
            if self._topo is None or not self._jobs:
                self.warmed = True
                return
            memo = self._memo_for(self._cfg, self._topo, self._jobs)
            cause = Cause(kind="warm-up")
            decision(
                self._topo,
                self._cfg,
                list(self._jobs.values()),
                version=self._version + 1,
                cause=cause,
                memo=memo,
                port_cache=self._ports,
            )
            self.warmed = True

    def start_job(self, req: JobRequest) -> tuple[JobRecord, int]:
        """A job starts: place it (when asked to), give it the top class, recompute."""
        with self._lock:
            if self._topo is None:
                raise StateConflictError(
                    "no cluster topology set", where="topology", expected="PUT /v1/cluster first"
                )
            rec = resolve_job(self._topo, self._cfg, req, self.jobs(), self.clock())
            jobs = {**self._jobs, rec.id: rec}
            v = self._commit(
                jobs, [("job-start", rec.id, {"gpus": list(rec.gpus)})], Cause(kind="job-start", job=rec.id)
            )
            return rec, v

    def end_job(self, job_id: str, *, reason: str = "job-end") -> int:
        """A job ends (or is removed): recompute for the others."""
        with self._lock:
            self.job(job_id)
            jobs = {k: v for k, v in self._jobs.items() if k != job_id}
            return self._commit(jobs, [(reason, job_id, {})], Cause(kind=reason, job=job_id))

    def heartbeat(self, job_id: str) -> float:
        """Record a heartbeat; returns the timeout the job must beat within."""
        with self._lock:
            self.job(job_id)
            self._beats[job_id] = self.clock()
            return self._cfg.heartbeat_timeout_s

    def post_profile(self, job_id: str, profile: ProfileRecord) -> int:
        """The profiler's measurement arrives: the job leaves the top class, everything is recomputed."""
        with self._lock:
            old = self.job(job_id)
            new = replace(
                old,
                compute_s=profile.compute_s,
                comm_bytes=profile.comm_bytes,
                overlap=old.overlap if profile.overlap is None else profile.overlap,
                profiling=False,
                profile=profile,
            )
            jobs = {**self._jobs, job_id: new}
            return self._commit(
                jobs, [("profile", job_id, {**profile.to_json()})], Cause(kind="profile", job=job_id)
            )

    def set_cluster(self, cfg: ClusterConfig) -> int:
        """Change the cluster (topology, levels, policy, ...); refused while jobs run on another topology."""
        with self._lock:
            check_names(cfg)
            if self._jobs and cfg.topology != self._cfg.topology:
                raise StateConflictError(
                    f"{len(self._jobs)} jobs are running",
                    where="topology",
                    expected="the same topology while jobs run",
                )
            topo = self._topo if cfg.topology == self._cfg.topology else build_cluster(cfg)
            return self._commit(
                dict(self._jobs),
                [("cluster", None, {**cfg.to_json()})],
                Cause(kind="cluster"),
                cfg=cfg,
                topo=topo,
            )

    def register_host(self, name: str, body: HostJSON) -> None:
        """An agent registers its host; a host or NIC the topology does not have is refused (a body
        without ``nics`` or ``agent``, as a Python caller may give, has none)."""
        body = {"nics": list(body.get("nics", [])), "agent": body.get("agent")}
        with self._lock:
            check_host(self._topo, name, body["nics"])
            now = self.clock()
            with self.store.atomic():
                self.store.put_host(name, body, now)
                self.store.add_event(now, "host-register", None, {"host": name, **body})
            self._hosts[name] = body
            self._views = {}

    def put_counters(self, host: str, counters: dict[str, float]) -> None:
        with self._lock:
            if host not in self._hosts:
                raise UnknownJobError(f"no registered host {host!r}", where="host")
            self._counters[host] = {**counters, "at_s": self.clock()}

    def tick(self) -> list[int]:
        """Remove jobs whose heartbeat timed out; end profiling windows that ran out. New versions."""
        with self._lock:
            now = self.clock()
            out: list[int] = []
            timeout = self._cfg.heartbeat_timeout_s
            dead = sorted(
                j for j, t in self._beats.items() if timeout > 0 and now - t > timeout and j in self._jobs
            )
            if dead:
                jobs = {k: v for k, v in self._jobs.items() if k not in dead}
                events = [("heartbeat-timeout", j, {"age_s": now - self._beats[j]}) for j in dead]
                out.append(
                    self._commit(
                        jobs, events, Cause(kind="heartbeat-timeout", job=dead[0], detail=",".join(dead))
                    )
                )
                self.missed_heartbeats += len(dead)  # once committed (a failed decision is retried)
            late = sorted(j.id for j in self._jobs.values() if j.profiling and now >= j.profiling_until_s)
            if late:
                jobs = {k: (replace(v, profiling=False) if k in late else v) for k, v in self._jobs.items()}
                events = [("profile-window-end", j, {}) for j in late]
                out.append(
                    self._commit(
                        jobs, events, Cause(kind="profile-window-end", job=late[0], detail=",".join(late))
                    )
                )
            return out
