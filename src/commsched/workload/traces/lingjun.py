"""Loader of the Alibaba Lingjun 2023 job trace (``job.csv`` + ``worker.csv`` [+ ``topo.csv``]).

Schema (reference/crux-spec.md §9.2–§9.4): ``job.csv`` has one row per job with ``job_name`` (join key),
``model`` (label), and timestamps ``gmt_job_submitted``, ``gmt_job_running``, ``gmt_job_finished``,
``gmt_job_stopped`` in the form ``YYYY/M/D HH:MM``; ``worker.csv`` has one row per worker (pod) with
``job_name``, ``host_ip`` (hash, joins ``topo.csv.ip``) and ``RES``, a JSON object of requested
resources whose ``nvidia.com/gpu`` (or ``admirl.ai/gpu``, ``gscore/gpu``) is the worker's GPU count.

Derivation of a :class:`~commsched.workload.traces.records.TraceJob`:

* ``gpus`` = sum of the workers' GPUs; ``hosts`` = the workers' ``host_ip`` labels, distinct, in file
  order (dropped when a ``topo.csv`` is given and a label is not in it);
* ``arrival_s`` = submission − earliest submission of the kept jobs (running time when the submission is
  empty); ``duration_s`` = end − running, end = ``gmt_job_finished`` or else ``gmt_job_stopped``; a
  0-minute run (minute resolution) becomes 30 s, half the resolution;
* ``model`` = :data:`~commsched.workload.traces.labels.LINGJUN` mapping of the label, unknown labels to
  its default (``bert-base``), counted per label in the notes.

Jobs that never ran (no running time), never ended, have no GPU workers, or end before they start are
skipped and counted in the notes.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §6.5; github.com/alibaba/alibaba-lingjun-dataset-2023.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from commsched.errors import InputError
from commsched.workload.records import JobId
from commsched.workload.traces.csvio import CsvRow, read_csv
from commsched.workload.traces.labels import LINGJUN
from commsched.workload.traces.records import Trace, TraceJob

JOB_COLUMNS = ("job_name", "model", "gmt_job_submitted", "gmt_job_running")
END_COLUMNS = ("gmt_job_finished", "gmt_job_stopped")
WORKER_COLUMNS = ("job_name", "host_ip", "RES")
GPU_KEYS = ("nvidia.com/gpu", "admirl.ai/gpu", "gscore/gpu")
TIME_FORMATS = ("%Y/%m/%d %H:%M", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M")
ZERO_RUN_S = 30.0  # a run shorter than the one-minute resolution: half a minute


@dataclass(frozen=True, slots=True, kw_only=True)
class _Workers:
    gpus: int
    hosts: tuple[str, ...]


@dataclass(slots=True, kw_only=True)
class _Tally:
    """Counts of what the loader skipped or defaulted (local to one call)."""

    skipped: Counter[str] = field(default_factory=Counter)
    unmapped: Counter[str] = field(default_factory=Counter)
    zero_runs: int = 0
    dropped_placements: int = 0


def parse_time(row: CsvRow, column: str) -> float | None:
    """Seconds since the epoch (read as UTC) of a timestamp field; ``None`` when empty.

    Examples
    --------
    >>> r = CsvRow(fields={"t": "2023/7/15 02:19"}, where="job.csv:2")
    >>> parse_time(r, "t") - parse_time(CsvRow(fields={"t": "2023/7/15 02:00"}, where=""), "t")
    1140.0
    """
    text = row.get(column)
    if not text or text.lower() in {"nan", "null", "none"}:
        return None
    for fmt in TIME_FORMATS:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    raise InputError(f"{column} = {text!r}", where=f"{row.where}: {column}", expected="time YYYY/M/D HH:MM")


def _worker_gpus(row: CsvRow) -> int:
    text = row.get("RES")
    if not text:
        return 0
    try:
        res = json.loads(text)
        if not isinstance(res, dict):
            raise TypeError
        vals = [float(res[k]) for k in GPU_KEYS if k in res]
    except (ValueError, TypeError):
        raise InputError(
            f"RES = {text[:60]!r}",
            where=f"{row.where}: RES",
            expected='a JSON object like {"nvidia.com/gpu": "8"}',
        ) from None
    return int(sum(vals))


def read_workers(path: str | Path) -> dict[str, _Workers]:
    """GPUs and host labels of each job in ``worker.csv`` (workers without GPUs are ignored)."""
    gpus: Counter[str] = Counter()
    hosts: dict[str, dict[str, None]] = {}
    for row in read_csv(path, required=WORKER_COLUMNS, what="Lingjun worker.csv"):
        n = _worker_gpus(row)
        if n <= 0:
            continue
        name = row.get("job_name")
        gpus[name] += n
        hosts.setdefault(name, {})[row.get("host_ip")] = None
    return {k: _Workers(gpus=gpus[k], hosts=tuple(h for h in hosts[k] if h)) for k in gpus}


def read_topo_labels(path: str | Path) -> frozenset[str]:
    """The host labels (``ip`` column) of a Lingjun ``topo.csv``."""
    return frozenset(r.get("ip") for r in read_csv(path, required=("ip",), what="Lingjun topo.csv"))


def _end_columns(rows: list[CsvRow], path: str | Path) -> tuple[str, ...]:
    have = tuple(c for c in END_COLUMNS if rows and c in rows[0].fields)
    if rows and not have:
        raise InputError(
            "Lingjun job.csv has no end-time column",
            where=f"{path}:1",
            expected="columns " + ",".join(JOB_COLUMNS) + " and one of " + ",".join(END_COLUMNS),
        )
    return have


def _times(row: CsvRow, ends: tuple[str, ...], tally: _Tally) -> tuple[float, float, float] | None:
    """(submitted, running, duration) of a job row, or ``None`` (counted) when it is skipped."""
    run = parse_time(row, "gmt_job_running")
    end = next((t for t in (parse_time(row, c) for c in ends) if t is not None), None)
    if run is None:
        tally.skipped["never ran (no gmt_job_running)"] += 1
        return None
    if end is None:
        tally.skipped["never ended (no gmt_job_finished/gmt_job_stopped)"] += 1
        return None
    if end < run:
        tally.skipped["ended before it started"] += 1
        return None
    sub = parse_time(row, "gmt_job_submitted")
    if end == run:
        tally.zero_runs += 1
    return (run if sub is None else sub), run, max(end - run, ZERO_RUN_S)


def _job(row: CsvRow, times: tuple[float, float], workers: _Workers, tally: _Tally) -> TraceJob:
    label = row.get("model")
    model = LINGJUN.lookup(label)
    if model is None:
        tally.unmapped[label or "(empty)"] += 1
        model = LINGJUN.default
    return TraceJob(
        id=JobId(row.get("job_name")),
        arrival_s=times[0],
        duration_s=times[1],
        gpus=workers.gpus,
        model=model,
        source=label,
        hosts=workers.hosts,
    )


def _notes(tally: _Tally, n_jobs: int) -> tuple[str, ...]:
    notes = [f"{n_jobs} job(s) kept"]
    notes += [f"skipped {n} job(s): {why}" for why, n in sorted(tally.skipped.items())]
    if tally.zero_runs:
        notes.append(f"{tally.zero_runs} job(s) ran < 1 minute: duration set to {ZERO_RUN_S:g} s")
    if tally.dropped_placements:
        notes.append(f"{tally.dropped_placements} job(s) had hosts not in topo.csv: placement dropped")
    if tally.unmapped:
        labels = ", ".join(f"{k} ({v})" for k, v in sorted(tally.unmapped.items()))
        total = sum(tally.unmapped.values())
        notes.append(f"{total} job(s) with unmapped model labels -> {LINGJUN.default}: {labels}")
    return tuple(notes)


def load_lingjun_trace(
    job_path: str | Path, worker_path: str | Path, topo_path: str | Path | None = None
) -> Trace:
    """Read the Lingjun trace into a :class:`Trace` (see the module docstring for every rule).

    Parameters
    ----------
    job_path, worker_path
        ``job.csv`` and ``worker.csv`` of alibaba-lingjun-dataset-2023.
    topo_path
        Optional ``topo.csv``: job placements whose hosts are not all in it are dropped (counted).

    Raises
    ------
    InputError
        A file is unreadable, lacks a required column (names ``file:1`` and the expected columns), or
        has a malformed timestamp or ``RES`` field (names ``file:line: column``).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "job.csv").write_text(
    ...     "job_name,model,gmt_job_submitted,gmt_job_running,gmt_job_finished,gmt_job_stopped\\n"
    ...     "j1,gpt-7b,2023/7/15 02:00,2023/7/15 02:01,2023/7/15 03:01,\\n"
    ...     "j2,resnet,2023/7/15 02:05,,,2023/7/15 02:06\\n")
    >>> _ = (d / "worker.csv").write_text(
    ...     'job_name,host_ip,RES\\nj1,aa,"{""nvidia.com/gpu"": ""8""}"\\nj1,bb,"{""nvidia.com/gpu"": 8}"\\n')
    >>> t = load_lingjun_trace(d / "job.csv", d / "worker.csv")
    >>> [(j.id, j.gpus, j.model, j.duration_s, j.hosts) for j in t.jobs]
    [('j1', 16, 'gpt3-crux', 3600.0, ('aa', 'bb'))]
    >>> t.notes[1]
    'skipped 1 job(s): never ran (no gmt_job_running)'
    """
    rows = read_csv(job_path, required=JOB_COLUMNS, what="Lingjun job.csv")
    ends = _end_columns(rows, job_path)
    workers = read_workers(worker_path)
    known = None if topo_path is None else read_topo_labels(topo_path)
    tally, seen = _Tally(), set()
    kept: list[tuple[float, float, CsvRow, _Workers]] = []
    for row in rows:
        name = row.get("job_name")
        if not name or name in seen:
            tally.skipped["empty or repeated job_name"] += 1
            continue
        seen.add(name)
        times = _times(row, ends, tally)
        if times is None:
            continue
        w = workers.get(name)
        if w is None:
            tally.skipped["no GPU workers in worker.csv"] += 1
            continue
        if known is not None and w.hosts and not set(w.hosts) <= known:
            tally.dropped_placements += 1
            w = _Workers(gpus=w.gpus, hosts=())
        kept.append((times[0], times[2], row, w))
    t0 = min((k[0] for k in kept), default=0.0)
    jobs = [_job(row, (sub - t0, dur), w, tally) for sub, dur, row, w in kept]
    jobs.sort(key=lambda j: (j.arrival_s, j.id))
    return Trace(
        name=Path(job_path).parent.name or "lingjun",
        source=f"alibaba-lingjun-dataset-2023: {job_path}, {worker_path}",
        jobs=tuple(jobs),
        notes=_notes(tally, len(jobs)),
    )
