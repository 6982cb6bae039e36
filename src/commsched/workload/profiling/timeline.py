"""Per-layer profiles from what a training step measures: forward time per module, gradient-ready times.

A measurement (``commsched profile``, or the H200 profiles of the zoo) records, in one instrumented
iteration, the forward time of every leaf module that owns parameters and, for every parameter tensor,
when its gradient was accumulated (``register_post_accumulate_grad_hook``). :func:`layers_from_timeline`
turns that into the zoo's per-layer form (:class:`~commsched.workload.records.LayerProfile`, forward
order, gradients ready in reverse forward order) whose sums equal the median totals of the timed
iterations:

* each parameter belongs to the module whose name prefixes it (``layer1.0.conv1.weight`` to
  ``layer1.0.conv1``); a parameter that no measured module owns (``cls.predictions.bias``, added outside
  any leaf module) becomes a layer of its own after the last module of its parent, with no forward time;
  a module whose parameters are all owned elsewhere (a tied output embedding) keeps its forward time and
  no bytes;
* forward times are scaled so that they sum to the median forward time (the time of modules without
  parameters, such as activations and attention, is spread over the layers in proportion);
* a layer's gradient is ready when its last parameter's is; going backward from the last layer, ready
  times are made non-decreasing (a layer whose gradient came earlier than a later layer's is counted
  ready with it, which the layer-wise models need), scaled so that the last ready time equals the median
  backward time, and a layer's backward time is the gap to the previous ready time.

References
----------
.. [1] Y. Peng et al., "A generic communication scheduler for distributed DNN training acceleration"
   (ByteScheduler), SOSP 2019, §2 (gradients become ready layer by layer in backward order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from commsched.errors import InputError
from commsched.workload.profiling.records import GradientReady
from commsched.workload.records import LayerProfile


@dataclass(frozen=True, slots=True, kw_only=True)
class ModuleTime:
    """Forward time of one layer, in forward order: a leaf module with parameters, or the parameters
    that one call of the forward pass used first (``params``: their names; empty: the parameters whose
    names the module's name prefixes)."""

    name: str
    forward_s: float
    params: tuple[str, ...] = ()


def _owner(param: str, modules: Sequence[str]) -> str | None:
    best = None
    for m in modules:
        if param.startswith(m + ".") and (best is None or len(m) > len(best)):
            best = m
    return best


def _insert_orphans(order: list[str], orphans: dict[str, list[GradientReady]]) -> list[str]:
    """Layer names in forward order, each orphan owner after the last module under its name."""
    out = list(order)
    for owner in orphans:
        under = [k for k, m in enumerate(out) if m.startswith(owner + ".") or m == owner]
        out.insert(under[-1] + 1 if under else len(out), owner)
    return out


def _group(
    modules: Sequence[ModuleTime], grads: Sequence[GradientReady]
) -> tuple[list[str], dict[str, list[GradientReady]]]:
    names = [m.name for m in modules]
    owned: dict[str, list[GradientReady]] = {n: [] for n in names}
    orphans: dict[str, list[GradientReady]] = {}
    listed = {p: m.name for m in modules for p in m.params}
    for g in grads:
        owner = listed.get(g.name) or _owner(g.name, [m.name for m in modules if not m.params])
        if owner is None:
            orphans.setdefault(g.name.rsplit(".", 1)[0] if "." in g.name else g.name, []).append(g)
        else:
            owned[owner].append(g)
    order = _insert_orphans(names, orphans)
    return order, {**owned, **orphans}


def layers_from_timeline(
    modules: Sequence[ModuleTime],
    grads: Sequence[GradientReady],
    *,
    forward_s: float,
    backward_s: float,
) -> tuple[LayerProfile, ...]:
    """The per-layer profile (forward order) of one instrumented iteration, scaled to the medians.

    Parameters
    ----------
    modules
        Leaf modules with parameters and their forward times, in forward order.
    grads
        Every parameter tensor with its gradient bytes and ready time (from the start of backward).
    forward_s, backward_s
        The median forward and backward times the layers must sum to.

    Raises
    ------
    InputError
        No gradients, or a negative or non-finite time.

    Examples
    --------
    >>> mods = [ModuleTime(name="fc1", forward_s=1.0), ModuleTime(name="fc2", forward_s=3.0)]
    >>> grads = [GradientReady(name="fc2.weight", size_bytes=8, ready_s=0.5),
    ...          GradientReady(name="fc1.weight", size_bytes=4, ready_s=2.0)]
    >>> [(ly.name, ly.forward_s, ly.backward_s, ly.param_bytes)
    ...  for ly in layers_from_timeline(mods, grads, forward_s=8.0, backward_s=4.0)]
    [('fc1', 2.0, 3.0, 4.0), ('fc2', 6.0, 1.0, 8.0)]
    """
    if not grads:
        raise InputError("no parameter gradients", where="gradients", expected="at least one")
    values = [forward_s, backward_s, *(m.forward_s for m in modules), *(g.ready_s for g in grads)]
    if any(not (v >= 0 and v != float("inf")) for v in values):
        raise InputError("a negative or non-finite time", where="timeline", expected="times >= 0")
    order, groups = _group(modules, grads)
    fwd = {m.name: m.forward_s for m in modules}
    fwd_total = sum(fwd.values())
    ready: dict[str, float] = {}
    running = 0.0
    for name in reversed(order):  # backward order: gradients ready no earlier than a later layer's
        mine = groups.get(name, [])
        running = max(running, max((g.ready_s for g in mine), default=running))
        ready[name] = running
    # ``backward_s / running`` as the scale (the shipped zoo is built with it); a subnormal ``running``
    # overflows it, and then each layer's share of the pass is taken first
    scale_b = backward_s / running if running > 0 else 0.0
    finite = scale_b != float("inf")
    out = []
    for k, name in enumerate(order):
        after = ready[order[k + 1]] if k + 1 < len(order) else 0.0
        share = fwd.get(name, 0.0) / fwd_total if fwd_total > 0 else 1.0 / len(order)
        out.append(
            LayerProfile(
                name=name,
                forward_s=forward_s * share,
                backward_s=_backward(ready[name] - after, running, backward_s, scale_b if finite else None)
                if running > 0
                else backward_s / len(order),
                param_bytes=float(sum(g.size_bytes for g in groups.get(name, []))),
            )
        )
    return tuple(out)


def _backward(span: float, running: float, backward_s: float, scale: float | None) -> float:
    """A layer's backward time: its span of ready times scaled to the pass (``scale``), or, where that
    scale overflows, its share of the pass times the pass."""
    return span * scale if scale is not None else span / running * backward_s
