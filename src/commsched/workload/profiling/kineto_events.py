"""The event table of a Kineto (``torch.profiler``) Chrome trace: CPU nesting, phases, GPU work.

:func:`event_table` reads the ``traceEvents`` of a trace into CPU events (``cpu_op`` and
``user_annotation``, nested per thread) and GPU events (``kernel``, ``gpu_memcpy``, ``gpu_memset``),
each GPU event tied to the CPU event that launched it through the ``correlation`` of its CUDA runtime
call. Every CPU event gets a *phase*:

* ``backward`` inside an ``autograd::engine::evaluate_function: ...`` event (the autograd engine runs
  every backward function under one, on its own thread on a GPU and on the calling thread on a CPU);
* ``optimizer`` inside an ``Optimizer.step#...`` or ``Optimizer.zero_grad#...`` annotation;
* ``comm`` for a collective of a process-group backend (``gloo:all_reduce``, ``nccl:all_gather``, ...);
* else ``forward`` when it starts before the first backward event of its iteration, ``other`` after it.

Iterations are the ``ProfilerStep#N`` annotations where the trace has them. A trace without them is cut
by its own structure (:func:`structural_windows`): a *backward pass* is a run of autograd backward
functions with no forward operator between them; each pass after the first begins a new iteration at the
first forward operator after the previous pass (and after the optimizer step that follows it, where there
is one). A trace whose optimizer steps do not match its backward passes one for one (gradient
accumulation, say) cannot be cut so and is refused; a trace with one backward pass is one iteration.

References
----------
.. [1] PyTorch, ``torch.profiler`` and Kineto's Chrome trace output (``export_chrome_trace``).
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from commsched.errors import InputError
from commsched.workload.profiling.types import element_size

BACKWARD_PREFIX = "autograd::engine::evaluate_function:"
ACCUMULATE = "torch::autograd::AccumulateGrad"
_CPU_CATS = ("cpu_op", "user_annotation")
_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
#: a process-group backend's collective: ``nccl:all_reduce``, ``gloo:broadcast`` (one colon, no spaces)
COLLECTIVE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*:[A-Za-z][A-Za-z0-9_]*$")
#: the backend operation a ``c10d::`` dispatcher operation becomes (``c10d::allreduce_`` -> ``all_reduce``)
C10D_OPS = {
    "allreduce_": "all_reduce", "allreduce_coalesced_": "all_reduce", "allgather_": "all_gather",
    "_allgather_base_": "all_gather", "allgather_into_tensor_coalesced_": "all_gather",
    "broadcast_": "broadcast",
    "reduce_scatter_": "reduce_scatter", "_reduce_scatter_base_": "reduce_scatter", "reduce_": "reduce",
    "alltoall_": "all_to_all", "alltoall_base_": "all_to_all", "gather_": "gather", "scatter_": "scatter",
    "barrier": "barrier",
}  # fmt: skip


def config_backend(config: object) -> str:
    """The one backend a process group's ``backend_config`` names (``"cpu:gloo,cuda:gloo"`` -> ``gloo``),
    else ``""`` (none, or a different one per device).

    Examples
    --------
    >>> config_backend("cpu:gloo,cuda:gloo"), config_backend("cpu:gloo,cuda:nccl"), config_backend("nccl")
    ('gloo', '', 'nccl')
    """
    if not isinstance(config, str):
        return ""
    names = {part.split(":")[-1].strip() for part in config.split(",") if part.strip()}
    return names.pop() if len(names) == 1 and COLLECTIVE_RE.match(f"x:{next(iter(names))}") else ""


def dispatcher_kind(name: str) -> str:
    """The collective a trace's operation name stands for: the backend's own operation
    (``gloo:all_reduce`` -> ``all_reduce``) or a ``c10d::`` dispatcher's (``c10d::allreduce_`` ->
    ``all_reduce``).

    Examples
    --------
    >>> dispatcher_kind("nccl:all_gather"), dispatcher_kind("c10d::allreduce_")
    ('all_gather', 'all_reduce')
    """
    if name.startswith("c10d::"):
        op = name.removeprefix("c10d::")
        return C10D_OPS.get(op, op.rstrip("_"))
    return name.rsplit(":", maxsplit=1)[-1].rstrip("_")


@dataclass(frozen=True, slots=True, kw_only=True)
class CpuEvent:
    """A CPU event (microseconds as in the trace) with its parent on the same thread."""

    index: int
    name: str
    cat: str
    thread: tuple[Any, Any]
    ts: float
    end: float
    args: dict[str, Any]
    parent: int | None
    phase: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuEvent:
    """A GPU event and the CPU event that launched it (``None`` where the launch is not in the trace)."""

    ts: float
    end: float
    launcher: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class EventTable:
    """CPU events in (thread, start) order, GPU events, and the iteration windows."""

    cpu: tuple[CpuEvent, ...]
    gpu: tuple[GpuEvent, ...]
    iterations: tuple[tuple[float, float], ...]
    device_name: str
    start_ns: int | None
    #: the process-group backend the trace's ``distributedInfo`` names (``gloo``, ``nccl``), else ``""``
    backend: str = ""


def _number(e: dict[str, Any], key: str, where: str) -> float:
    v = e.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise InputError(f"event {e.get('name')!r} has no numeric {key!r}", where=where, expected="numbers")
    return float(v)


def _split(
    events: Sequence[Any], where: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, Any]]:
    cpu, gpu, launch = [], [], {}
    for k, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat not in _CPU_CATS and cat not in _GPU_CATS and cat not in _LAUNCH_CATS:
            continue
        at = f"{where}: traceEvents[{k}]"
        row = {"name": str(e.get("name", "")), "ts": _number(e, "ts", at), "dur": _number(e, "dur", at)}
        raw_args = e.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        row |= {"args": args, "thread": (e.get("pid"), e.get("tid")), "cat": cat}
        if cat in _CPU_CATS:
            cpu.append(row)
        elif cat in _GPU_CATS:
            gpu.append(row)
        elif "correlation" in args:
            launch[args["correlation"]] = row
    return cpu, gpu, launch


def _phase_of(name: str, parent_phase: str | None) -> str | None:
    if parent_phase in ("backward", "optimizer"):
        return parent_phase
    if name.startswith(BACKWARD_PREFIX):
        return "backward"
    if name.startswith("Optimizer."):
        return "optimizer"
    if COLLECTIVE_RE.match(name):
        return "comm"
    return parent_phase


def _nest(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int | None, str | None]]:
    """(row, parent index, inherited phase) in (thread, ts, -dur) order; steps are no one's parent."""
    rows.sort(key=lambda r: (str(r["thread"]), r["ts"], -r["dur"]))
    out: list[tuple[dict[str, Any], int | None, str | None]] = []
    stack: list[int] = []
    for k, r in enumerate(rows):
        while stack and (
            rows[stack[-1]]["thread"] != r["thread"]
            or rows[stack[-1]]["ts"] + rows[stack[-1]]["dur"] <= r["ts"]
        ):
            stack.pop()
        parent = stack[-1] if stack else None
        phase = _phase_of(r["name"], out[parent][2] if parent is not None else None)
        out.append((r, parent, phase))
        if not r["name"].startswith("ProfilerStep#"):
            stack.append(k)
    return out


def _windows(rows: list[dict[str, Any]]) -> tuple[tuple[float, float], ...]:
    steps = sorted((r["ts"], r["ts"] + r["dur"]) for r in rows if r["name"].startswith("ProfilerStep#"))
    return tuple(steps) if steps else ((-math.inf, math.inf),)


def _marks(nested: list[tuple[dict[str, Any], int | None, str | None]]) -> list[tuple[float, str, float]]:
    """(start, kind, end) in time order: ``b`` backward function, ``o`` optimizer step, ``f`` top-level
    forward operator (a ``cpu_op`` outside backward, optimizer and collectives)."""
    out = []
    for r, parent, phase in nested:
        if phase == "backward" and r["name"].startswith(BACKWARD_PREFIX):
            kind = "b"
        elif r["name"].startswith("Optimizer.step#"):
            kind = "o"
        elif phase is None and parent is None and r["cat"] == "cpu_op":
            kind = "f"
        else:
            continue
        out.append((r["ts"], kind, r["ts"] + r["dur"]))
    out.sort()
    return out


def structural_windows(
    nested: list[tuple[dict[str, Any], int | None, str | None]], *, where: str
) -> tuple[tuple[float, float], ...]:
    """Iteration windows of a trace without ``ProfilerStep#`` marks, from its backward passes and
    optimizer steps (see the module's documentation).

    Raises
    ------
    InputError
        Several backward passes whose number differs from that of the optimizer steps.
    """
    passes: list[list[float]] = []  # [first start, last end] of each backward pass
    boundaries: list[float] = []
    steps, seen_forward, after = 0, True, -math.inf  # ``after``: when the previous pass (and step) ended
    first_forward: float | None = None
    for ts, kind, end in _marks(nested):
        if kind == "o":
            steps += 1
            after = max(after, end)
        elif kind == "f":
            if first_forward is None and ts >= after:
                first_forward = ts
            seen_forward = True
        elif seen_forward or not passes:
            if passes:
                boundaries.append(first_forward if first_forward is not None else ts)
            passes.append([ts, end])
            seen_forward, first_forward = False, None
        else:
            passes[-1][1] = max(passes[-1][1], end)
        if kind == "b":
            after = max(after, end)
    if len(passes) > 1 and steps and steps != len(passes):
        raise InputError(
            f"no ProfilerStep# marks, and {len(passes)} backward passes for {steps} optimizer steps: "
            "the iterations cannot be told apart",
            where=where,
            expected="a trace recorded with prof.step() after each iteration (ProfilerStep# marks)",
        )
    edges = [-math.inf, *boundaries, math.inf]
    return tuple((a, math.nextafter(b, -math.inf)) for a, b in itertools.pairwise(edges))


def _resolve(
    nested: list[tuple[dict[str, Any], int | None, str | None]], windows: Sequence[tuple[float, float]]
) -> list[CpuEvent]:
    starts = [w[0] for w in windows]
    first_bwd: dict[int, float] = {}
    for r, _, phase in nested:
        if phase == "backward":
            w = max(bisect.bisect_right(starts, r["ts"]) - 1, 0)
            first_bwd[w] = min(first_bwd.get(w, math.inf), r["ts"])
    out = []
    for k, (r, parent, inherited) in enumerate(nested):
        phase = inherited
        if phase is None:
            w = max(bisect.bisect_right(starts, r["ts"]) - 1, 0)
            phase = "forward" if r["ts"] < first_bwd.get(w, math.inf) else "other"
        out.append(
            CpuEvent(index=k, name=r["name"], cat=r["cat"], thread=r["thread"], ts=r["ts"],
                     end=r["ts"] + r["dur"], args=r["args"], parent=parent, phase=phase)
        )  # fmt: skip
    return out


def _launchers(
    cpu: Sequence[CpuEvent], gpu_rows: list[dict[str, Any]], launch: dict[int, Any]
) -> list[GpuEvent]:
    by_thread: dict[tuple[Any, Any], list[CpuEvent]] = {}
    for e in cpu:
        by_thread.setdefault(e.thread, []).append(e)
    starts = {t: [e.ts for e in evs] for t, evs in by_thread.items()}
    out = []
    for g in gpu_rows:
        rt = launch.get(g["args"].get("correlation"))
        owner = None
        if rt is not None and rt["thread"] in by_thread:
            evs = by_thread[rt["thread"]]
            k = bisect.bisect_right(starts[rt["thread"]], rt["ts"]) - 1
            cand: CpuEvent | None = evs[k] if k >= 0 else None
            while cand is not None and cand.end < rt["ts"]:
                cand = cpu[cand.parent] if cand.parent is not None else None
            owner = cand.index if cand is not None else None
        out.append(GpuEvent(ts=g["ts"], end=g["ts"] + g["dur"], launcher=owner))
    return out


def event_table(doc: dict[str, Any], *, where: str) -> EventTable:
    """The CPU and GPU events of a parsed Kineto trace.

    Raises
    ------
    InputError
        No ``traceEvents`` list, no CPU operator events, or an event without numeric times.
    """
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        raise InputError(
            "not a Kineto trace (no traceEvents list)",
            where=where,
            expected="torch.profiler Chrome-trace JSON",
        )
    cpu_rows, gpu_rows, launch = _split(events, where)
    if not any(r["cat"] == "cpu_op" for r in cpu_rows):
        raise InputError(
            "the trace has no cpu_op events",
            where=where,
            expected="a torch.profiler trace of a training step",
        )
    windows = _windows(cpu_rows)
    nested = _nest(cpu_rows)
    if windows == ((-math.inf, math.inf),):
        windows = structural_windows(nested, where=where)
    cpu = _resolve(nested, windows)
    props = doc.get("deviceProperties")
    name = (
        str(props[0].get("name", ""))
        if isinstance(props, list) and props and isinstance(props[0], dict)
        else ""
    )
    base = doc.get("baseTimeNanoseconds")
    info = doc.get("distributedInfo")
    backend = config_backend(info.get("backend")) if isinstance(info, dict) else ""
    return EventTable(
        cpu=tuple(cpu),
        gpu=tuple(_launchers(cpu, gpu_rows, launch)),
        iterations=windows,
        device_name=name,
        start_ns=int(base) if isinstance(base, int) and not isinstance(base, bool) else None,
        backend=backend,
    )


def first_input_bytes(e: CpuEvent) -> float:
    """Bytes of an event's first input as recorded (``Input Dims`` x element size), NaN when not recorded.

    Examples
    --------
    >>> ev = CpuEvent(index=0, name="torch::autograd::AccumulateGrad", cat="cpu_op", thread=(1, 1), ts=0.0,
    ...               end=1.0, args={"Input Dims": [[1000, 2048]], "Input type": ["float"]}, parent=None,
    ...               phase="backward")
    >>> first_input_bytes(ev)
    8192000.0
    """
    dims, types = e.args.get("Input Dims"), e.args.get("Input type")
    if not (
        isinstance(dims, list) and dims and isinstance(dims[0], list) and isinstance(types, list) and types
    ):
        return math.nan
    return float(math.prod(int(d) for d in dims[0]) * element_size(str(types[0])))


def union_s(intervals: Sequence[tuple[float, float]]) -> float:
    """Length of the union of intervals given in microseconds, in seconds.

    Examples
    --------
    >>> union_s([(0, 2e6), (1e6, 3e6), (5e6, 6e6)])
    4.0
    """
    total, cur_a, cur_b = 0.0, None, None
    for a, b in sorted(intervals):
        if cur_b is None or a > cur_b:
            if cur_a is not None and cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_a is not None and cur_b is not None:
        total += cur_b - cur_a
    return total * 1e-6  # us -> s
