"""A step profile from a Kineto (``torch.profiler``) Chrome trace, plain or gzipped.

What is read (see :mod:`commsched.workload.profiling.kineto_events` for the phases):

* **forward and backward time** per iteration: on a GPU trace the *busy* GPU time (the union of the
  kernels, copies and memsets each phase launched), not the span from first to last kernel; on a
  CPU-only trace the union of the phase's outermost CPU events. With several ``ProfilerStep#``
  iterations the medians are taken.
* **gradients**: every ``torch::autograd::AccumulateGrad`` with its recorded shape and dtype
  (``record_shapes=True``), in the order accumulated, with its ready time from the start of backward (GPU
  time of the last backward work launched before it, on a GPU).
* **layers** from the autograd annotations: the backward functions run until a run of
  ``AccumulateGrad``\\ s closes a layer; the forward operator that created the layer's last function
  (same ``Sequence number``) places it in forward order, and the forward operators since the previous
  layer's give its forward time.
* **collectives**: the process-group backend's operations (``nccl:all_reduce``, ``gloo:all_reduce``):
  input bytes and process group (``Process Group Name`` where recorded).

References
----------
.. [1] PyTorch, ``torch/csrc/autograd/engine.cpp`` (``evaluate_function`` spans; ``AccumulateGrad`` runs
   right after the function that produced its gradient).
"""

from __future__ import annotations

import bisect
import datetime as dt
import itertools
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commsched.errors import InputError
from commsched.workload.profiling.kineto_events import (
    ACCUMULATE,
    C10D_OPS,
    COLLECTIVE_RE,
    CpuEvent,
    EventTable,
    dispatcher_kind,
    event_table,
    first_input_bytes,
    union_s,
)
from commsched.workload.profiling.quality import spread, spread_warnings
from commsched.workload.profiling.records import Collective, GradientReady, Provenance, StepProfile
from commsched.workload.profiling.tracefile import DEFAULT_MAX_BYTES, parse_json, read_bytes
from commsched.workload.profiling.tracelayers import kineto_layers
from commsched.workload.profiling.types import element_size


def _in(window: tuple[float, float], ts: float) -> bool:
    return window[0] <= ts <= window[1]


def _phase_times(table: EventTable, window: tuple[float, float]) -> dict[str, float]:
    """Busy seconds of each phase in one iteration."""
    cpu = table.cpu
    spans: dict[str, list[tuple[float, float]]] = {}
    if table.gpu:
        for g in table.gpu:
            if g.launcher is not None and _in(window, cpu[g.launcher].ts):
                spans.setdefault(cpu[g.launcher].phase, []).append((g.ts, g.end))
    else:
        for e in cpu:
            parent = cpu[e.parent] if e.parent is not None else None
            outermost = parent is None or parent.phase != e.phase
            if outermost and _in(window, e.ts) and not e.name.startswith("ProfilerStep#"):
                spans.setdefault(e.phase, []).append((e.ts, e.end))
    return {phase: union_s(iv) for phase, iv in spans.items()}


def _accumulations(table: EventTable, window: tuple[float, float]) -> list[CpuEvent]:
    return [
        e for e in table.cpu
        if e.name == ACCUMULATE and e.phase == "backward" and _in(window, e.ts)
    ]  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class _BackwardGpu:
    """The iteration's backward GPU work: launch times (sorted), the latest end among the work launched up
    to each (a running maximum), and when the first of it started."""

    launched: list[float]
    ends: list[float]
    start: float


def _backward_gpu(table: EventTable, window: tuple[float, float]) -> _BackwardGpu | None:
    rows = []
    for g in table.gpu:
        launcher = table.cpu[g.launcher] if g.launcher is not None else None
        if launcher is not None and launcher.phase == "backward" and _in(window, launcher.ts):
            rows.append((launcher.ts, g.end, g.ts))
    if not rows:
        return None
    rows.sort()
    return _BackwardGpu(
        launched=[r[0] for r in rows],
        ends=list(itertools.accumulate((r[1] for r in rows), max)),
        start=min(r[2] for r in rows),
    )


def _gradients(table: EventTable, window: tuple[float, float]) -> tuple[GradientReady, ...]:
    accs = _accumulations(table, window)
    if not accs:
        return ()
    gpu = _backward_gpu(table, window)
    start = gpu.start if gpu else min(e.ts for e in table.cpu if e.phase == "backward" and _in(window, e.ts))
    out = []
    for k, e in enumerate(accs):
        ready = e.end  # on a CPU: when the accumulation ended
        if gpu:  # on a GPU: when the backward work launched before it has run
            i = bisect.bisect_right(gpu.launched, e.end) - 1
            ready = gpu.ends[i] if i >= 0 else start
        dims = e.args.get("Input Dims", [[]])[0]
        out.append(
            GradientReady(
                name=f"grad{k}{list(dims)}", size_bytes=first_input_bytes(e), ready_s=(ready - start) * 1e-6
            )
        )
    if any(math.isnan(g.size_bytes) for g in out):
        return ()
    return tuple(out)


def _group_name(table: EventTable, e: CpuEvent) -> str:
    cur: CpuEvent | None = e
    while cur is not None:
        name = cur.args.get("Process Group Name")
        if name is not None:
            return str(name)
        cur = table.cpu[cur.parent] if cur.parent is not None else None
    return ""


def _nested_bytes(e: CpuEvent, dtype: str) -> float:
    """Bytes of the tensors of a ``c10d::*`` event's first input (a list of tensors, recorded as a
    ``TensorList`` without its element type: ``dtype`` is the backend events' own)."""
    dims = e.args.get("Input Dims")
    if not (isinstance(dims, list) and dims and isinstance(dims[0], list)):
        return math.nan
    shapes = dims[0] if all(isinstance(d, list) for d in dims[0]) else [dims[0]]
    try:
        return float(sum(math.prod(int(d) for d in s) for s in shapes) * element_size(dtype))
    except (InputError, TypeError, ValueError):
        return math.nan


def _collective_events(
    table: EventTable, window: tuple[float, float], dtype: str
) -> list[tuple[CpuEvent, str]]:
    """The backend's collectives (in the order they started, over all threads), and each ``c10d::*``
    operation that no backend event pairs (the first unpaired one starting after it on the same bytes): the
    profiler records a backend's event when its work ends, on the backend's thread, and loses it when that
    comes after it stopped (the last bucket of a step, on a busy machine). A backend with several threads
    (gloo's two) may start a later bucket's work first, so the order alone does not pair them."""
    events = sorted((e for e in table.cpu if _in(window, e.ts)), key=lambda e: e.ts)
    backend = [e for e in events if COLLECTIVE_RE.match(e.name)]
    prefixes = {e.name.split(":")[0] for e in backend} or ({table.backend} if table.backend else set())
    prefix = prefixes.pop() if len(prefixes) == 1 else ""
    out = [(e, e.name) for e in backend]
    free = list(backend)
    for e in events:
        op = e.name.removeprefix("c10d::")
        if not (e.name.startswith("c10d::") and op in C10D_OPS and prefix):
            continue
        mine = _nested_bytes(e, dtype)
        pair = next((b for b in free if b.ts >= e.ts and _same_bytes(mine, first_input_bytes(b))), None)
        if pair is not None:
            free.remove(pair)
        else:
            out.append((e, f"{prefix}:{C10D_OPS[op]}"))
    return sorted(out, key=lambda c: c[0].ts)


def _same_bytes(a: float, b: float) -> bool:
    """Whether a dispatcher of ``a`` bytes may be the one a backend event of ``b`` bytes ran (either unknown:
    it may)."""
    return math.isnan(a) or math.isnan(b) or a == b


def _collectives(table: EventTable, window: tuple[float, float]) -> tuple[Collective, ...]:
    out = []
    # a dispatcher's tensors are a TensorList without an element type: the backend events' own, else
    # (every backend event lost) the gradients' the buckets are made of
    types = [e.args.get("Input type") for e in table.cpu if COLLECTIVE_RE.match(e.name) and _in(window, e.ts)]
    types += [e.args.get("Input type") for e in _accumulations(table, window)]
    seen_type = next((str(t[0]) for t in types if isinstance(t, list) and t and t[0]), "")
    for e, name in _collective_events(table, window, seen_type):
        size = first_input_bytes(e) if name == e.name else _nested_bytes(e, seen_type)
        if math.isnan(size):
            nelems, dtype = e.args.get("In msg nelems"), e.args.get("dtype")
            size = float(nelems) * element_size(str(dtype)) if isinstance(nelems, int | float) else math.nan
        out.append(
            Collective(name=name, size_bytes=size, group=_group_name(table, e), kind=dispatcher_kind(name))
        )
    return tuple(c for c in out if not math.isnan(c.size_bytes))


_MATMULS = (
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::convolution",
    "aten::_convolution",
)
_PRECISIONS = {"c10::bfloat16": "bf16", "c10::half": "fp16", "float": "fp32", "double": "fp64"}


def _precision(table: EventTable, window: tuple[float, float]) -> str:
    """The precision of the forward pass's matrix products and convolutions (their first input's type):
    ``bf16`` or ``fp16`` where any ran in it (autocast), else ``fp32``; ``""`` where none is recorded."""
    seen = set()
    for e in table.cpu:
        types = e.args.get("Input type")
        if (
            e.name in _MATMULS
            and e.phase == "forward"
            and _in(window, e.ts)
            and isinstance(types, list)
            and types
        ):
            seen.add(_PRECISIONS.get(str(types[0]).lower(), ""))
    return next((p for p in ("bf16", "fp16", "fp32", "fp64") if p in seen), "")


def _elements(table: EventTable, window: tuple[float, float]) -> int | None:
    """Elements of the gradients accumulated (the parameters that get one), where the shapes are recorded."""
    total = 0
    for e in _accumulations(table, window):
        dims = e.args.get("Input Dims")
        if not (isinstance(dims, list) and dims and isinstance(dims[0], list)):
            return None
        total += math.prod(int(d) for d in dims[0])
    return total or None


def _date(table: EventTable) -> str:
    if table.start_ns is None or not table.cpu:
        return ""
    first_us = min(e.ts for e in table.cpu)
    stamp = table.start_ns / 1e9 + first_us / 1e6  # ns, us -> s
    try:
        return dt.datetime.fromtimestamp(stamp, tz=dt.UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return ""


def profile_from_kineto(doc: dict[str, Any], *, where: str, name: str = "") -> StepProfile:
    """The step profile of a parsed Kineto trace (see the module's documentation for what is read).

    Raises
    ------
    InputError
        Not a Kineto trace, or one without a forward and a backward pass.
    """
    table = event_table(doc, where=where)
    times = [_phase_times(table, w) for w in table.iterations]
    times = [t for t in times if t.get("forward", 0) > 0 and t.get("backward", 0) > 0]
    if not times:
        raise InputError(
            "no training iteration in the trace (no forward pass followed by autograd backward functions)",
            where=where,
            expected="a torch.profiler trace of forward and backward",
        )
    fwd = [t["forward"] for t in times]
    bwd = [t["backward"] for t in times]
    last = table.iterations[-1] if len(table.iterations) == len(times) else table.iterations[0]
    grads = _gradients(table, last)
    forward_s, backward_s = statistics.median(fwd), statistics.median(bwd)
    gpu = bool(table.gpu)
    cpu_name = "CPU: model not recorded in the trace"
    return StepProfile(
        name=name or Path(where).name.split(".")[0],
        forward_s=forward_s,
        backward_s=backward_s,
        sync_bytes=float(sum(g.size_bytes for g in grads)),
        layers=kineto_layers(table, last, forward_s=forward_s, backward_s=backward_s) if grads else (),
        gradients=grads,
        forward_all=tuple(fwd),
        backward_all=tuple(bwd),
        collectives=_collectives(table, last),
        params=_elements(table, last) if grads else None,
        spread=spread(fwd, bwd),
        warnings=spread_warnings(fwd, bwd),
        provenance=Provenance(
            source=f"Kineto trace {where} ({'busy GPU' if gpu else 'CPU'} time, {len(times)} iteration(s))",
            device="cuda" if gpu else "cpu",
            device_name=table.device_name or ("" if gpu else cpu_name),
            precision=_precision(table, last),
            date=_date(table),
            iterations=len(times),
        ),
    )


def read_kineto(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES, name: str = "") -> StepProfile:
    """Read a Kineto trace file (plain or gzipped JSON) into a :class:`StepProfile`.

    Examples
    --------
    >>> from pathlib import Path
    >>> f = Path("/work/shared/data/h200-profiles/trace-resnet50.json.gz")
    >>> p = read_kineto(f) if f.exists() else None
    >>> (round(p.compute_s, 3), p.sync_bytes / 4, len(p.gradients)) if p else (0.053, 25557032.0, 161)
    (0.053, 25557032.0, 161)
    """
    data = read_bytes(path, max_bytes=max_bytes)
    doc = parse_json(data, where=str(path), expected="a Kineto (torch.profiler) Chrome-trace JSON")
    return profile_from_kineto(doc, where=str(path), name=name)
