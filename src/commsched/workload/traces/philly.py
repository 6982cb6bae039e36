"""Loaders of the Philly-derived traces: Pollux workloads and ``philly.csv``, Gavel, Tiresias.

Each takes paths and returns a :class:`~commsched.workload.traces.records.Trace`; model labels are
mapped with the tables of :mod:`commsched.workload.traces.labels` (unknown labels -> the table's
default, counted in the notes). None of these traces records a placement.

Durations (standalone run time):

* Tiresias ``60_job.csv`` and Pollux ``philly.csv``: the ``duration`` column.
* Gavel: ``total_steps / throughput`` with the measured isolated throughput (iterations/s, whole job) of
  ``(job type, scale factor)`` on ``gpu_type`` from ``simulation_throughputs.json``; a scale factor
  without a measurement uses the largest measured one below it, scaled linearly.
* Pollux workloads (which give no duration): iterations to the target metric, from the last row of
  ``traces/<app>/validation-<B>.csv`` with ``B`` the nearest measured global batch (scaled by
  ``B / batch_size``), times the measured ``step_time`` of ``placements.csv``/``scalability.csv`` with
  the job's replica count (nearest measured) and local batch nearest ``batch_size / num_replicas``.

References
----------
.. [1] M. Jeon et al., "Analysis of large-scale multi-tenant GPU clusters for DNN training workloads"
   (Philly), USENIX ATC 2019.
.. [2] A. Qiao et al., "Pollux", OSDI 2021, §5.3. .. [3] D. Narayanan et al., "Gavel", OSDI 2020.
.. [4] J. Gu et al., "Tiresias", NSDI 2019.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from commsched.errors import InputError
from commsched.workload.records import JobId
from commsched.workload.traces.csvio import CsvRow, count, number, read_csv, read_text
from commsched.workload.traces.labels import GAVEL, POLLUX, TIRESIAS, LabelMap
from commsched.workload.traces.records import Trace, TraceJob


def _mapped(labels: LabelMap, label: str, unmapped: Counter[str]) -> str:
    model = labels.lookup(label)
    if model is None:
        unmapped[label] += 1
        return labels.default
    return model


def _trace(name: str, source: str, jobs: list[TraceJob], unmapped: Counter[str], default: str) -> Trace:
    jobs.sort(key=lambda j: (j.arrival_s, j.id))
    notes = [f"{len(jobs)} job(s)"]
    if unmapped:
        labels = ", ".join(f"{k} ({v})" for k, v in sorted(unmapped.items()))
        notes.append(f"{sum(unmapped.values())} job(s) with unmapped labels -> {default}: {labels}")
    return Trace(name=name, source=source, jobs=tuple(jobs), notes=tuple(notes))


# ---------------------------------------------------------------------------------------------- Tiresias
def load_tiresias_trace(path: str | Path) -> Trace:
    """Tiresias job CSV (``job_id,num_gpu,submit_time,model_name,duration``, e.g. ``60_job.csv``).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "jobs.csv"
    >>> _ = f.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\\n"
    ...                  "0,8,30,133,vgg11,147,23\\n")
    >>> [(j.id, j.gpus, j.arrival_s, j.model, j.source) for j in load_tiresias_trace(f).jobs]
    [('0', 8, 30.0, 'vgg16', 'vgg11')]
    """
    required = ("job_id", "num_gpu", "submit_time", "model_name", "duration")
    unmapped: Counter[str] = Counter()
    jobs = [
        TraceJob(
            id=JobId(r.get("job_id")),
            arrival_s=number(r, "submit_time"),
            duration_s=number(r, "duration", minimum=1e-9),
            gpus=count(r, "num_gpu"),
            model=_mapped(TIRESIAS, r.get("model_name"), unmapped),
            source=r.get("model_name"),
        )
        for r in read_csv(path, required=required, what="Tiresias job trace")
    ]
    return _trace(Path(path).stem, f"tiresias: {path}", jobs, unmapped, TIRESIAS.default)


# ---------------------------------------------------------------------------------------- Pollux philly
def load_philly_csv(path: str | Path, *, model: str = "resnet50") -> Trace:
    """Pollux's ``traces/philly.csv`` (``timestamp,duration,num_gpus,...``); it has no model labels.

    Every job gets ``model`` (recorded in the notes); arrivals are seconds after the earliest timestamp.
    """
    required = ("timestamp", "duration", "num_gpus")
    rows = read_csv(path, required=required, what="Philly trace")
    stamps = [_stamp(r) for r in rows]
    t0 = min(stamps, default=0.0)
    jobs = [
        TraceJob(
            id=JobId(f"philly-{i}"),
            arrival_s=t - t0,
            duration_s=max(number(r, "duration"), 1.0),
            gpus=count(r, "num_gpus"),
            model=model,
            source=r.get("cluster"),
        )
        for i, (r, t) in enumerate(zip(rows, stamps, strict=True))
    ]
    trace = _trace(Path(path).stem, f"pollux-adaptdl philly.csv: {path}", jobs, Counter(), model)
    return Trace(
        name=trace.name,
        source=trace.source,
        jobs=trace.jobs,
        notes=(*trace.notes, f"no model labels in the trace: every job is {model}; 0 s runs set to 1 s"),
    )


def _stamp(row: CsvRow) -> float:
    try:
        return datetime.strptime(row.get("timestamp"), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        raise InputError(
            f"timestamp = {row.get('timestamp')!r}",
            where=f"{row.where}: timestamp",
            expected="YYYY-MM-DD HH:MM:SS",
        ) from None


# ----------------------------------------------------------------------------------------------- Gavel
def _gavel_fields(fields: list[str], where: str) -> tuple[str, float, tuple[int, float]]:
    """(job type, arrival, (scale factor, total steps)) of a 7- or 10-field Gavel trace line."""
    try:
        if len(fields) == 7:
            return fields[0], float(fields[5]), (int(fields[6]), float(fields[4]))
        if len(fields) == 10:
            return fields[0], float(fields[9]), (int(fields[6]), float(fields[5]))
    except ValueError:
        pass
    raise InputError(
        f"bad Gavel trace line ({len(fields)} fields)",
        where=where,
        expected="7 tab-separated fields (job_type..arrival_time, scale_factor) or the 10-field format",
    )


def _gavel_throughput(table: dict[str, object], job_type: str, scale: int, where: str) -> float:
    measured = {}
    for key, val in table.items():
        m = re.fullmatch(r"\('(.*)', (\d+)\)", key)
        if (
            m
            and m.group(1) == job_type
            and isinstance(val, dict)
            and isinstance(val.get("null"), float | int)
        ):
            measured[int(m.group(2))] = float(val["null"])
    below = [s for s in measured if s <= scale]
    if not below:
        raise InputError(
            f"no throughput for {job_type!r} x{scale}", where=where, expected="a measured job type"
        )
    s = max(below)
    return measured[s] * scale / s


def load_gavel_trace(
    trace_path: str | Path, throughputs_path: str | Path, *, gpu_type: str = "v100"
) -> Trace:
    """A Gavel ``.trace`` file; durations from ``simulation_throughputs.json`` on ``gpu_type``.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "t.trace").write_text("LM (batch size 20)\\tcmd\\t-n\\t1\\t1000\\t5.0\\t16\\n")
    >>> _ = (d / "tp.json").write_text('{"v100": {"(\\'LM (batch size 20)\\', 8)": {"null": 50.0}}}')
    >>> t = load_gavel_trace(d / "t.trace", d / "tp.json")
    >>> [(j.gpus, j.arrival_s, j.duration_s, j.model) for j in t.jobs]
    [(16, 5.0, 10.0, 'gnmt')]
    """
    try:
        table = json.loads(read_text(throughputs_path, "Gavel throughputs"))[gpu_type]
    except (ValueError, KeyError, TypeError):
        raise InputError(
            f"no {gpu_type!r} table", where=str(throughputs_path), expected="Gavel throughputs JSON"
        ) from None
    unmapped: Counter[str] = Counter()
    cache: dict[tuple[str, int], float] = {}
    jobs = []
    lines = read_text(trace_path, "Gavel trace").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        where = f"{trace_path}:{i + 1}"
        job_type, arrival, (scale, steps) = _gavel_fields(line.split("\t"), where)
        if (job_type, scale) not in cache:
            cache[job_type, scale] = _gavel_throughput(table, job_type, scale, where)
        jobs.append(
            TraceJob(
                id=JobId(f"{Path(trace_path).stem}-{i}"),
                arrival_s=arrival,
                duration_s=steps / cache[job_type, scale],
                gpus=scale,
                model=_mapped(GAVEL, job_type, unmapped),
                source=job_type,
            )
        )
    return _trace(Path(trace_path).stem, f"gavel: {trace_path} ({gpu_type})", jobs, unmapped, GAVEL.default)


# ---------------------------------------------------------------------------------------------- Pollux
def _iterations(app_dir: Path, batch: float) -> float:
    """Iterations to the target metric at global batch ``batch`` (nearest measured batch, scaled)."""
    files = {
        int(m.group(1)): f
        for f in app_dir.glob("validation-*.csv")
        if (m := re.search(r"-(\d+)\.csv$", f.name))
    }
    if not files:
        raise InputError("no validation-<batch>.csv", where=str(app_dir), expected="Pollux traces/<app>/")
    b = min(files, key=lambda k: (abs(math.log(k / batch)), k))
    rows = read_csv(files[b], required=("iteration",), what="Pollux validation")
    return number(rows[-1], "iteration", minimum=1.0) * b / batch


def _step_time(app_dir: Path, replicas: int, local_bsz: float) -> float:
    """Measured step time: ``replicas`` GPUs (nearest measured count), local batch nearest ``local_bsz``."""
    meas: list[tuple[int, float, float]] = []
    for r in read_csv(
        app_dir / "placements.csv", required=("placement", "local_bsz", "step_time"), what="Pollux"
    ):
        meas.append(
            (
                sum(int(c) for c in r.get("placement") if c.isdigit()),
                number(r, "local_bsz"),
                number(r, "step_time"),
            )
        )
    scal = app_dir / "scalability.csv"
    if scal.exists():
        for r in read_csv(scal, required=("num_replicas", "local_bsz", "step_time"), what="Pollux"):
            meas.append((count(r, "num_replicas"), number(r, "local_bsz"), number(r, "step_time")))
    if not meas:
        raise InputError("no step-time measurements", where=str(app_dir), expected="placements.csv rows")
    n = min({m[0] for m in meas}, key=lambda k: (abs(k - replicas), k))
    return min((m for m in meas if m[0] == n), key=lambda m: (abs(m[1] - local_bsz), m[2]))[2]


def load_pollux_workload(workload_path: str | Path, traces_dir: str | Path | None = None) -> Trace:
    """A Pollux ``workload-N.csv`` (``name,time,application,num_replicas,batch_size``).

    ``traces_dir`` holds ``<application>/placements.csv`` etc. (default: ``../../traces`` of the
    workload file, as in the adaptdl ``simulator/`` layout); durations are derived from it (module doc).
    """
    p = Path(workload_path)
    tdir = Path(traces_dir) if traces_dir is not None else p.parent.parent / "traces"
    required = ("name", "time", "application", "num_replicas", "batch_size")
    unmapped: Counter[str] = Counter()
    cache: dict[tuple[str, int, float], float] = {}
    jobs = []
    for r in read_csv(p, required=required, what="Pollux workload"):
        app, n, bsz = r.get("application"), count(r, "num_replicas"), number(r, "batch_size", minimum=1.0)
        if (app, n, bsz) not in cache:
            if not (tdir / app).is_dir():
                raise InputError(
                    f"no measurements for {app!r}",
                    where=f"{r.where}: application",
                    expected=f"a folder {tdir}/{app}",
                )
            cache[app, n, bsz] = _iterations(tdir / app, bsz) * _step_time(tdir / app, n, bsz / n)
        jobs.append(
            TraceJob(
                id=JobId(r.get("name")),
                arrival_s=number(r, "time"),
                duration_s=cache[app, n, bsz],
                gpus=n,
                model=_mapped(POLLUX, app, unmapped),
                source=app,
            )
        )
    name = f"pollux-{p.parent.name}-{p.stem}"
    return _trace(name, f"pollux-adaptdl: {p} (durations from {tdir})", jobs, unmapped, POLLUX.default)
