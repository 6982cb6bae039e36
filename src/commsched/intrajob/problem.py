"""Inputs and outputs of the layer-wise iteration-time models (Mercury §V-A, Table I).

One iteration runs from the start of ``bp^L`` (time 0) to the end of ``fp^L`` of the next forward pass
(Mercury Eq. 5). Layers are indexed ``1..L`` in forward order in the paper and ``0..L-1`` here.

Units: bandwidth in **bits** per second, tensor sizes in **bytes**, times in seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from commsched.errors import InputError
from commsched.workload.records import LayerProfile

FloatArray = npt.NDArray[np.float64]

#: bits per byte (every bytes <-> bits conversion goes through this constant)
BITS_PER_BYTE = 8.0


def _vector(values: Sequence[float] | FloatArray | float, n: int, field: str) -> FloatArray:
    raw = np.asarray(values, dtype=np.float64)
    arr = np.full(n, float(raw)) if raw.ndim == 0 else np.array(raw, dtype=np.float64)
    if arr.shape != (n,):
        raise InputError(f"has {arr.size} values", where=field, expected=f"{n} values, one per layer")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise InputError("contains a negative or non-finite value", where=field, expected="values >= 0")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class IterationProblem:
    """The inputs of Mercury's iteration-time model (§V-A, Table I), layers in forward order.

    Build it with :func:`make_problem` or :func:`problem_from_layers`, which validate the inputs.

    Attributes
    ----------
    bandwidth_bps
        ``B``: bandwidth of every worker and PS, in bits/s, each direction (full duplex).
    size_bytes
        ``S^l``: gradient (and parameter) bytes of layer ``l``.
    bp_s, fp_s, upd_s
        ``t_bp^l``, ``t_fp^l``, ``t_upd^l``: backward, forward and optimizer time of layer ``l``.
    names
        Layer names (may be empty).
    """

    bandwidth_bps: float
    size_bytes: FloatArray
    bp_s: FloatArray
    fp_s: FloatArray
    upd_s: FloatArray
    names: tuple[str, ...] = ()

    @property
    def n_layers(self) -> int:
        return int(self.size_bytes.size)

    @property
    def push_s(self) -> FloatArray:
        """``t_push^l = S^l / B`` (Mercury Eq. 1); equal to ``t_pull^l`` (Eq. 2)."""
        # bytes -> bits
        return self.size_bytes * BITS_PER_BYTE / self.bandwidth_bps

    @property
    def bandwidth_bytes_per_s(self) -> float:
        # bits/s -> bytes/s
        return self.bandwidth_bps / BITS_PER_BYTE

    def with_bandwidth(self, bandwidth_bps: float) -> IterationProblem:
        """The same model at another bandwidth (equivalently, communication times scaled)."""
        _check_bandwidth(bandwidth_bps)
        return replace(self, bandwidth_bps=float(bandwidth_bps))


def _check_bandwidth(bandwidth_bps: float) -> None:
    if not (np.isfinite(bandwidth_bps) and bandwidth_bps > 0):
        raise InputError(f"bandwidth {bandwidth_bps!r}", where="bandwidth_bps", expected="a finite value > 0")


def make_problem(
    *,
    bandwidth_bps: float,
    size_bytes: Sequence[float] | FloatArray,
    bp_s: Sequence[float] | FloatArray,
    fp_s: Sequence[float] | FloatArray,
    upd_s: Sequence[float] | FloatArray | float = 0.0,
    names: Sequence[str] = (),
) -> IterationProblem:
    """Validate Mercury's Table I inputs and build an :class:`IterationProblem`.

    Examples
    --------
    >>> p = make_problem(bandwidth_bps=8e9, size_bytes=[1e9, 2e9], bp_s=[1, 1], fp_s=[1, 1])
    >>> p.push_s.tolist()
    [1.0, 2.0]

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-A, Table I and Eq. (1)-(2).
    """
    _check_bandwidth(bandwidth_bps)
    size = np.asarray(size_bytes, dtype=np.float64)
    n = int(size.size)
    if size.ndim != 1 or n == 0:
        raise InputError("no layers", where="size_bytes", expected="at least one layer")
    if names and len(names) != n:
        raise InputError(f"{len(names)} names", where="names", expected=f"{n} names or none")
    return IterationProblem(
        bandwidth_bps=float(bandwidth_bps),
        size_bytes=_vector(size, n, "size_bytes"),
        bp_s=_vector(bp_s, n, "bp_s"),
        fp_s=_vector(fp_s, n, "fp_s"),
        upd_s=_vector(upd_s, n, "upd_s"),
        names=tuple(names),
    )


def problem_from_layers(
    layers: Sequence[LayerProfile],
    *,
    bandwidth_bps: float,
    upd_s: Sequence[float] | float = 0.0,
) -> IterationProblem:
    """Build the model inputs from a workload per-layer profile (forward order).

    ``LayerProfile.param_bytes`` is ``S^l``; ``backward_s``/``forward_s`` are ``t_bp^l``/``t_fp^l``.
    Profiles carry no optimizer time, so ``t_upd^l`` defaults to 0.

    Examples
    --------
    >>> from commsched.workload import LayerProfile
    >>> ls = [LayerProfile(name="fc", forward_s=0.1, backward_s=0.2, param_bytes=1e6)]
    >>> problem_from_layers(ls, bandwidth_bps=1e9).names
    ('fc',)

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-A, Table I.
    """
    if not layers:
        raise InputError("empty per-layer profile", where="layers", expected="at least one layer")
    return make_problem(
        bandwidth_bps=bandwidth_bps,
        size_bytes=[lp.param_bytes for lp in layers],
        bp_s=[lp.backward_s for lp in layers],
        fp_s=[lp.forward_s for lp in layers],
        upd_s=upd_s,
        names=[lp.name for lp in layers],
    )


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class CommSchedule:
    """What a communication policy decides: per-layer push start/end and pull end (seconds).

    ``push_start_s`` is when the first byte of the layer's gradient is sent; ``push_end_s`` is
    ``tau_push^l``; ``pull_end_s`` is ``tau_pull^l`` (Mercury Table I). Arrays are in forward order.
    """

    push_start_s: FloatArray
    push_end_s: FloatArray
    pull_end_s: FloatArray


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerTimeline:
    """One layer's timeline in one iteration (time 0 = start of ``bp^L``).

    ``upd_start_s`` is ``max(tau_pull^l, tau_fp^{l-1})``; the optimizer then runs and ``fp^l`` starts at
    ``fp_start_s`` and ends at ``fp_end_s`` (``tau_fp^l``, Mercury Eq. 4).
    """

    index: int
    name: str
    bp_end_s: float
    push_start_s: float
    push_end_s: float
    pull_end_s: float
    upd_start_s: float
    fp_start_s: float
    fp_end_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class IterationTimeline:
    """A policy's iteration: its time ``t_iter`` (Eq. 5), the oracle (Eq. 9) and per-layer timelines."""

    policy: str
    iteration_s: float
    oracle_s: float
    layers: tuple[LayerTimeline, ...]

    @property
    def normalized_speed(self) -> float:
        """``t_oracle / t_iter`` (Mercury §V-C, Fig. 11)."""
        return self.oracle_s / self.iteration_s if self.iteration_s > 0 else 1.0
