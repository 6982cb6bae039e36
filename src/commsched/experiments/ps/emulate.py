"""An emulated training worker: real tensor sizes, per-layer compute as sleeps (Mercury §V-A timing).

One iteration runs as Mercury's model counts it (Eq. 3-5): back-propagation from the last layer to the
first (a layer's gradient is handed to ``push_pull`` with priority = its position from the input side
as soon as its ``bp`` ends), then the next forward pass, layer ``l`` starting once its sum is back and
layer ``l-1`` is done. Gradients are seeded per (rank, layer), so every worker can build the NumPy
reference sum and report the largest absolute error of what came back.

Between iterations (outside the measured time) each worker checks the sums and then meets the others
at a one-element ``push_pull`` barrier, so every iteration starts on all workers together, as the
model assumes: the check of ~35 M elements takes a worker 0.1-0.5 s on a busy host, and a worker
that starts late holds up every part's completion for all of them (measured without the barrier:
iteration starts up to 0.5 s apart).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from commsched.runtime.ps.client import Handle, PSClient

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True, kw_only=True)
class EmulatedLayer:
    """One layer: gradient elements (float32) and forward/backward compute seconds."""

    name: str
    elements: int
    fp_s: float
    bp_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class EmulationResult:
    """Per-iteration times (after warm-up), their start times, and the largest error against NumPy.

    ``started_s`` counts from ``origin_s``, a ``time.perf_counter()`` reading (the host's monotonic
    clock, shared by every process of the host, so a driver can place iterations on its own timeline).
    """

    rank: int
    iteration_s: tuple[float, ...]
    started_s: tuple[float, ...]
    max_abs_error: float
    origin_s: float = 0.0


def gradient(seed: int, rank: int, layer: int, elements: int) -> F32:
    """The deterministic gradient of ``rank`` for ``layer``.

    Examples
    --------
    >>> bool((gradient(0, 1, 2, 5) == gradient(0, 1, 2, 5)).all())
    True
    """
    return np.random.default_rng([seed, rank, layer]).random(elements, dtype=np.float32) - np.float32(0.5)


#: name of the barrier tensor (declared after the layers, so every worker gives it the same key)
BARRIER = "__commsched_barrier__"


def _max_abs_error(out: F32, ref: F32, scratch: F32) -> float:
    """``max |out - ref|`` through ``scratch`` (no temporary arrays of the layer's size)."""
    view = scratch[: out.size]
    np.subtract(out, ref, out=view)
    np.abs(view, out=view)
    return float(view.max()) if view.size else 0.0


def _sleep_until(t: float) -> None:
    left = t - time.perf_counter()
    if left > 0:
        time.sleep(left)


def run_emulation(
    client: PSClient,
    layers: Sequence[EmulatedLayer],
    *,
    iterations: int,
    warmup: int = 1,
    seed: int = 0,
    timeout_s: float = 60.0,
) -> EmulationResult:
    """Train ``iterations + warmup`` emulated iterations through ``client``."""
    n, rank = client.num_workers, client.rank
    grads = {i: gradient(seed, rank, i, ly.elements) for i, ly in enumerate(layers) if ly.elements}
    ref = {i: sum((gradient(seed, r, i, layers[i].elements) for r in range(n)), np.zeros(1, np.float32))
           for i in grads}  # fmt: skip
    scratch = np.empty(max((ly.elements for ly in layers), default=0), np.float32)
    outs = {i: np.empty_like(g) for i, g in grads.items()}  # result buffers, reused every iteration
    times: list[float] = []
    starts: list[float] = []
    err = 0.0
    origin = time.perf_counter()
    for it in range(iterations + warmup):
        if it:
            client.push_pull(np.zeros(1, np.float32), name=BARRIER, timeout_s=timeout_s)
        t0 = time.perf_counter()
        handles: dict[int, Handle] = {}
        clock = t0
        for i in range(len(layers) - 1, -1, -1):  # back-propagation, last layer first
            clock += layers[i].bp_s
            _sleep_until(clock)
            if i in grads:
                handles[i] = client.push_pull_async(grads[i], name=layers[i].name, priority=i, out=outs[i])
        results: list[tuple[int, F32]] = []
        for i, ly in enumerate(layers):  # the next forward pass
            if i in handles:
                results.append((i, handles[i].wait(timeout_s)))
            _sleep_until(time.perf_counter() + ly.fp_s)
        if it >= warmup:
            times.append(time.perf_counter() - t0)
            starts.append(t0 - origin)
        for i, out in results:
            err = max(err, _max_abs_error(out, ref[i], scratch))
    return EmulationResult(
        rank=rank, iteration_s=tuple(times), started_s=tuple(starts), max_abs_error=err, origin_s=origin
    )
