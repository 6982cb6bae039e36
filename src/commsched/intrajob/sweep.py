"""Trace-driven analysis of the iteration-time models (Mercury §V-C): bandwidth sweeps and the least
bandwidth that reaches a target normalised speed; and the name -> policy registry used at the edges.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from commsched.errors import InputError
from commsched.intrajob.iteration import (
    CommPolicy,
    iteration_time,
    mercury,
    mercury_no_preemption,
    oracle_schedule,
    oracle_time,
    wfbp,
)
from commsched.intrajob.partitioned import PartitionConfig, bytescheduler, mercury_packets
from commsched.intrajob.problem import IterationProblem
from commsched.registry import Registry

#: the policies of Mercury Fig. 11/12, in display order
POLICY_NAMES: tuple[str, ...] = ("wfbp", "bytescheduler", "mercury-no-preemption", "mercury", "oracle")


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyOptions:
    """Parameters of the named policies.

    ``packet_bytes = 0`` models Mercury in fluid form (Algorithm 1); a positive value simulates it
    packet by packet (:func:`commsched.intrajob.partitioned.mercury_packets`).
    """

    bytescheduler: PartitionConfig = field(default_factory=PartitionConfig)
    packet_bytes: float = 0.0


def policy_registry(options: PolicyOptions | None = None) -> Registry[CommPolicy]:
    """The named communication policies (``wfbp``, ``bytescheduler``, ``mercury``, ...).

    Examples
    --------
    >>> policy_registry().names()
    ('wfbp', 'bytescheduler', 'mercury-no-preemption', 'mercury', 'oracle')

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-B.
    """
    opts = options or PolicyOptions()
    reg: Registry[CommPolicy] = Registry("intra-job communication policy")
    reg.register("wfbp", wfbp)
    reg.register("bytescheduler", bytescheduler(opts.bytescheduler))
    if opts.packet_bytes > 0:
        reg.register("mercury-no-preemption", mercury_packets(opts.packet_bytes, preemptive=False))
        reg.register("mercury", mercury_packets(opts.packet_bytes))
    else:
        reg.register("mercury-no-preemption", mercury_no_preemption)
        reg.register("mercury", mercury)
    reg.register("oracle", oracle_schedule)
    return reg


def paper_target(model_name: str) -> float:
    """The normalised speed that counts as "best scalability" in Mercury Fig. 12: 0.90 for BERT, else 0.99.

    Examples
    --------
    >>> paper_target("bert-base"), paper_target("vgg16")
    (0.9, 0.99)

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-C.
    """
    return 0.90 if "bert" in model_name.lower() else 0.99


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepResult:
    """Iteration times of several policies over a bandwidth sweep (Mercury Fig. 11)."""

    bandwidths_bps: tuple[float, ...]
    oracle_s: float
    iteration_s: Mapping[str, tuple[float, ...]]

    def normalized_speed(self, policy: str) -> tuple[float, ...]:
        """``t_oracle / t_iter`` of ``policy`` at every bandwidth of the sweep."""
        return tuple(self.oracle_s / t for t in self.iteration_s[policy])


def bandwidth_sweep(
    problem: IterationProblem, bandwidths_bps: Sequence[float], policies: Mapping[str, CommPolicy]
) -> SweepResult:
    """``t_iter`` of each policy at each bandwidth (Mercury §V-C, Fig. 11).

    Examples
    --------
    >>> from commsched.intrajob.problem import make_problem
    >>> p = make_problem(bandwidth_bps=1.0, size_bytes=[1, 1], bp_s=[1, 1], fp_s=[1, 1])
    >>> r = bandwidth_sweep(p, [8.0, 80.0], {"mercury": mercury})
    >>> [round(v, 3) for v in r.normalized_speed("mercury")]
    [0.8, 0.976]

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-C, Fig. 11.
    """
    probs = [problem.with_bandwidth(b) for b in bandwidths_bps]
    times = {name: tuple(iteration_time(p, pol) for p in probs) for name, pol in policies.items()}
    return SweepResult(
        bandwidths_bps=tuple(float(b) for b in bandwidths_bps),
        oracle_s=oracle_time(problem),
        iteration_s=times,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class BandwidthSearch:
    """Where :func:`min_bandwidth` looks: a geometric grid over ``[lo_bps, hi_bps]``, then bisection."""

    lo_bps: float = 1e6
    hi_bps: float = 1e13
    grid_points: int = 64
    rel_tol: float = 1e-4

    def __post_init__(self) -> None:
        if not (0 < self.lo_bps < self.hi_bps and math.isfinite(self.hi_bps)):
            raise InputError(
                f"range [{self.lo_bps}, {self.hi_bps}]", where="bandwidth search", expected="0 < lo < hi"
            )


def min_bandwidth(
    problem: IterationProblem, policy: CommPolicy, *, target: float, search: BandwidthSearch | None = None
) -> float | None:
    """The least bandwidth (bits/s) at which ``t_oracle / t_iter >= target`` (Mercury Fig. 12).

    The normalised speed is non-decreasing in bandwidth for the policies here, so the first grid point
    that reaches the target brackets the answer, which bisection refines to ``rel_tol``. Returns
    ``None`` when even ``hi_bps`` does not reach the target.

    Examples
    --------
    One layer, BP 1 s, FP 1 s, 1 GB: the push must take at most ``2/0.99 - 2`` s.

    >>> from commsched.intrajob.problem import make_problem
    >>> p = make_problem(bandwidth_bps=1.0, size_bytes=[1e9], bp_s=[1], fp_s=[1])
    >>> round(min_bandwidth(p, mercury, target=0.99) / 8e9, 1)
    49.5

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-C, Fig. 12 ("minimum required bandwidth").
    """
    s = search or BandwidthSearch()
    if not 0 < target <= 1:
        raise InputError(f"target {target!r}", where="target", expected="a value in (0, 1]")
    oracle = oracle_time(problem)

    def ok(bw: float) -> bool:
        return oracle >= target * iteration_time(problem.with_bandwidth(bw), policy)

    grid = np.geomspace(s.lo_bps, s.hi_bps, s.grid_points)
    hits = [i for i, bw in enumerate(grid) if ok(float(bw))][:1]
    if not hits:
        return None
    if hits[0] == 0:
        return float(grid[0])
    lo, hi = float(grid[hits[0] - 1]), float(grid[hits[0]])
    while hi - lo > s.rel_tol * hi:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def bandwidth_reduction(
    problem: IterationProblem, *, target: float, policy: CommPolicy, baseline: CommPolicy
) -> float | None:
    """``1 - B_min(policy) / B_min(baseline)``: how much less bandwidth ``policy`` needs (Fig. 12).

    Examples
    --------
    >>> from commsched.intrajob.problem import make_problem
    >>> p = make_problem(bandwidth_bps=1.0, size_bytes=[1e9, 1e9], bp_s=[1, 1], fp_s=[1, 1])
    >>> bandwidth_reduction(p, target=0.99, policy=mercury, baseline=wfbp) > 0
    True

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-C: "Mercury reduces the required bandwidth ... by up to ~50%".
    """
    ours = min_bandwidth(problem, policy, target=target)
    base = min_bandwidth(problem, baseline, target=target)
    if ours is None or base is None:
        return None
    return 1.0 - ours / base
