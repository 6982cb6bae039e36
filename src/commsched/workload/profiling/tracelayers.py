"""Per-layer profiles from the autograd annotations of a Kineto trace.

The autograd engine runs every backward function under an ``autograd::engine::evaluate_function: NAME``
span and accumulates a parameter's gradient (``AccumulateGrad``) right after the function that produced
it. So, in backward order, a *layer* is the run of backward functions up to and including a run of
``AccumulateGrad``\\ s: its backward time is their busy time and its bytes are the gradients accumulated.
The last function before the ``AccumulateGrad``\\ s was created in the forward pass by the operator that
carries the same ``Sequence number`` (the last top-level forward operator with that number: operators that
create no autograd node share the number of the next one that does); that operator places the layer in
forward order, and the forward operators since the previous layer's give the layer's forward time.
Backward work after the last ``AccumulateGrad`` joins the last layer of backward order; a layer whose
function has no forward operator joins the next one in backward order. The layers are scaled to the
median forward and backward times, so that they sum to them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from commsched.workload.profiling.kineto_events import (
    ACCUMULATE,
    BACKWARD_PREFIX,
    CpuEvent,
    EventTable,
    first_input_bytes,
    union_s,
)
from commsched.workload.records import LayerProfile

_ACC_FUNCTION = f"{BACKWARD_PREFIX} {ACCUMULATE}"


@dataclass(slots=True)
class _Group:
    """A layer being assembled in backward order (mutable while the trace is walked)."""

    spans: list[tuple[float, float]] = field(default_factory=list)
    size_bytes: float = 0.0
    anchor_seq: int | None = None
    accumulated: bool = False


def _top(cpu: tuple[CpuEvent, ...], k: int, cache: dict[int, int]) -> int:
    """Index of the outermost operator (``cpu_op``) of ``k``'s phase around it (``k`` itself if none).

    Annotations (``DistributedDataParallel.forward``, ``record_function`` blocks) are skipped, so that the
    operators inside them stay units of their own.
    """
    if k in cache:
        return cache[k]
    chain = [k]
    while (p := cpu[chain[-1]].parent) is not None and cpu[p].phase == cpu[k].phase:
        chain.append(p)
    ops = [i for i in chain if cpu[i].cat == "cpu_op"]
    top = ops[-1] if ops else k
    cache[k] = top
    return top


def _spans(
    table: EventTable, window: tuple[float, float], phase: str
) -> tuple[list[int], dict[int, list[tuple[float, float]]]]:
    """Outermost events of ``phase`` in the window (time order) and the busy intervals under each."""
    cpu = table.cpu
    cache: dict[int, int] = {}
    inside = [
        e.index for e in cpu
        if e.phase == phase and window[0] <= e.ts <= window[1] and not e.name.startswith("ProfilerStep#")
    ]  # fmt: skip
    tops = sorted(
        (k for k in inside if cpu[k].cat == "cpu_op" and _top(cpu, k, cache) == k), key=lambda k: cpu[k].ts
    )
    spans: dict[int, list[tuple[float, float]]] = {k: [] for k in tops}
    if table.gpu:
        for g in table.gpu:
            if g.launcher is not None and cpu[g.launcher].phase == phase:
                top = _top(cpu, g.launcher, cache)
                if top in spans:
                    spans[top].append((g.ts, g.end))
    else:
        for k in tops:
            spans[k].append((cpu[k].ts, cpu[k].end))
    return tops, spans


def _accumulated_bytes(table: EventTable, tops: list[int]) -> dict[int, float]:
    cpu = table.cpu
    cache: dict[int, int] = {}
    out: dict[int, float] = {}
    wanted = set(tops)
    for e in cpu:
        if e.name == ACCUMULATE and e.phase == "backward":
            top = _top(cpu, e.index, cache)
            size = first_input_bytes(e)
            if top in wanted and not math.isnan(size):
                out[top] = out.get(top, 0.0) + size
    return out


def _backward_groups(table: EventTable, window: tuple[float, float]) -> list[_Group]:
    tops, spans = _spans(table, window, "backward")
    sizes = _accumulated_bytes(table, tops)
    groups: list[_Group] = [_Group()]
    for k in tops:
        e = table.cpu[k]
        is_acc = e.name == _ACC_FUNCTION
        if groups[-1].accumulated and not is_acc:
            groups.append(_Group())
        g = groups[-1]
        g.spans.extend(spans[k])
        if is_acc:
            g.size_bytes += sizes.get(k, 0.0)
            g.accumulated = True
        elif not g.accumulated:
            seq = e.args.get("Sequence number")
            g.anchor_seq = int(seq) if isinstance(seq, int) else None
    if len(groups) > 1 and not groups[-1].accumulated:  # backward work after the last gradient
        tail = groups.pop()
        groups[-1].spans.extend(tail.spans)
    return groups


def _forward_positions(
    table: EventTable, window: tuple[float, float]
) -> tuple[list[int], dict[int, int], list[float]]:
    tops, spans = _spans(table, window, "forward")
    position = {k: i for i, k in enumerate(tops)}
    cpu = table.cpu
    cache: dict[int, int] = {}
    seq_pos: dict[int, int] = {}
    for e in cpu:
        seq = e.args.get("Sequence number")
        if e.phase == "forward" and isinstance(seq, int) and window[0] <= e.ts <= window[1]:
            pos = position.get(_top(cpu, e.index, cache))
            if pos is not None:
                seq_pos[seq] = max(seq_pos.get(seq, -1), pos)
    return tops, seq_pos, [union_s(spans[k]) for k in tops]


def kineto_layers(
    table: EventTable, window: tuple[float, float], *, forward_s: float, backward_s: float
) -> tuple[LayerProfile, ...]:
    """Layers in forward order from one iteration's autograd annotations, scaled to the given totals.

    Returns ``()`` when no backward function can be placed in the forward pass.
    """
    tops, seq_pos, fwd_busy = _forward_positions(table, window)
    placed: dict[int, _Group] = {}
    carry = _Group()
    for g in _backward_groups(table, window):
        carry.spans.extend(g.spans)
        carry.size_bytes += g.size_bytes
        pos = seq_pos.get(g.anchor_seq) if g.anchor_seq is not None else None
        if pos is None:
            continue
        into = placed.setdefault(pos, _Group())
        into.spans.extend(carry.spans)
        into.size_bytes += carry.size_bytes
        carry = _Group()
    if not placed:
        return ()
    last = min(placed)  # leftover backward work (unplaced functions) joins the last layer of backward order
    placed[last].spans.extend(carry.spans)
    placed[last].size_bytes += carry.size_bytes
    order = sorted(placed)
    bounds = [*order[:-1], len(tops) - 1]
    fwd, start = [], 0
    for b in bounds:
        fwd.append(sum(fwd_busy[start : b + 1]))
        start = b + 1
    bwd = [union_s(placed[p].spans) for p in order]
    f_scale = forward_s / sum(fwd) if sum(fwd) > 0 else 0.0
    b_scale = backward_s / sum(bwd) if sum(bwd) > 0 else 0.0
    return tuple(
        LayerProfile(
            name=f"{i}:{table.cpu[tops[p]].name}",
            forward_s=f * f_scale,
            backward_s=b * b_scale,
            param_bytes=placed[p].size_bytes,
        )
        for i, (p, f, b) in enumerate(zip(order, fwd, bwd, strict=True))
    )
