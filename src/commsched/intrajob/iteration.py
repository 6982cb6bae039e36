"""Mercury's layer-wise iteration-time model (§V-A, Eq. 3-5 and 9) and the fluid policies of §V-B.

A *communication policy* is a plain callable ``IterationProblem -> CommSchedule`` (per-layer push and
pull times). :func:`simulate_iteration` then applies the computation chain (Eq. 3-5) to give the
iteration time and per-layer timelines. Policies here:

* :func:`wfbp` — wait-free back-propagation, Eq. (6)-(7), closed form (vectorised).
* :func:`mercury` — Algorithm 1: preemptive priority by layer index (front layers first) in fluid form
  (packet size -> 0), push and pull fully overlapped (Eq. 8).
* :func:`mercury_no_preemption` — Algorithm 1 with a FIFO buffer (line 14 changed), Eq. (8) kept.
* :func:`oracle_schedule` — no communication at all: gives ``t_oracle`` (Eq. 9) through Eq. (4)-(5).

The packet-granular versions and ByteScheduler live in :mod:`commsched.intrajob.partitioned`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from commsched.intrajob.problem import (
    CommSchedule,
    FloatArray,
    IterationProblem,
    IterationTimeline,
    LayerTimeline,
    problem_from_layers,
)
from commsched.workload.records import LayerProfile

#: a communication policy: the model inputs -> per-layer push/pull times
CommPolicy = Callable[[IterationProblem], CommSchedule]


def bp_end_times(problem: IterationProblem) -> FloatArray:
    """``tau_bp^l = sum_{i=l}^{L} t_bp^i`` (Mercury Eq. 3): BP runs from layer L down to layer 1.

    Examples
    --------
    >>> from commsched.intrajob.problem import make_problem
    >>> p = make_problem(bandwidth_bps=1.0, size_bytes=[0, 0, 0], bp_s=[1, 2, 3], fp_s=[0, 0, 0])
    >>> bp_end_times(p).tolist()
    [6.0, 5.0, 3.0]

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-A, Eq. (3).
    """
    out: FloatArray = np.cumsum(problem.bp_s[::-1])[::-1]
    return out


def forward_end_times(problem: IterationProblem, pull_end_s: FloatArray) -> FloatArray:
    """``tau_fp^l`` of Mercury Eq. (4): ``max(tau_pull^l, tau_fp^{l-1}) + t_upd^l + t_fp^l``.

    Vectorised: with ``U_l = sum_{i<=l} (t_upd^i + t_fp^i)``, the recurrence unrolls to
    ``tau_fp^l = U_l + max_{j<=l} (tau_pull^j - U_{j-1})`` (a running maximum).

    Examples
    --------
    >>> from commsched.intrajob.problem import make_problem
    >>> p = make_problem(bandwidth_bps=1.0, size_bytes=[0, 0], bp_s=[0, 0], fp_s=[1, 1])
    >>> forward_end_times(p, np.array([0.0, 5.0])).tolist()
    [1.0, 6.0]

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-A, Eq. (4); reading: ``upd^l`` runs after ``fp^{l-1}``.
    """
    u = problem.upd_s + problem.fp_s
    cum = np.cumsum(u)
    before = cum - u  # U_{l-1}
    out: FloatArray = cum + np.maximum.accumulate(pull_end_s - before)
    return out


def simulate_iteration(problem: IterationProblem, policy: CommPolicy, *, name: str = "") -> IterationTimeline:
    """Run one iteration under ``policy``: per-layer timelines and ``t_iter = tau_fp^L`` (Eq. 5).

    Examples
    --------
    >>> from commsched.intrajob.problem import make_problem
    >>> p = make_problem(bandwidth_bps=8.0, size_bytes=[1, 1], bp_s=[1, 1], fp_s=[1, 1])
    >>> simulate_iteration(p, wfbp, name="wfbp").iteration_s
    6.0

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-A, Eq. (3)-(5) and (9).
    """
    sched = policy(problem)
    bp_end = bp_end_times(problem)
    fp_end = forward_end_times(problem, sched.pull_end_s)
    fp_start = fp_end - problem.fp_s
    upd_start = fp_start - problem.upd_s
    names = problem.names or tuple(f"layer{i}" for i in range(problem.n_layers))
    layers = tuple(
        LayerTimeline(
            index=i,
            name=names[i],
            bp_end_s=float(bp_end[i]),
            push_start_s=float(sched.push_start_s[i]),
            push_end_s=float(sched.push_end_s[i]),
            pull_end_s=float(sched.pull_end_s[i]),
            upd_start_s=float(upd_start[i]),
            fp_start_s=float(fp_start[i]),
            fp_end_s=float(fp_end[i]),
        )
        for i in range(problem.n_layers)
    )
    return IterationTimeline(
        policy=name or getattr(policy, "__name__", "policy"),
        iteration_s=float(fp_end[-1]),
        oracle_s=oracle_time(problem),
        layers=layers,
    )


def iteration_time(problem: IterationProblem, policy: CommPolicy) -> float:
    """``t_iter`` (Mercury Eq. 5) of ``policy``, without building per-layer records.

    Examples
    --------
    >>> from commsched.intrajob.problem import make_problem
    >>> p = make_problem(bandwidth_bps=8.0, size_bytes=[1, 1], bp_s=[1, 1], fp_s=[1, 1])
    >>> iteration_time(p, mercury)
    5.0

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-A, Eq. (5).
    """
    return float(forward_end_times(problem, policy(problem).pull_end_s)[-1])


def layers_iteration_time(
    layers: Sequence[LayerProfile], *, bandwidth_bps: float, policy: CommPolicy | None = None
) -> float:
    """``t_iter`` of a workload per-layer profile at ``bandwidth_bps`` (default policy: Mercury).

    A communication-time scaling ``s`` is the same as ``bandwidth_bps / s``.

    Examples
    --------
    >>> from commsched.workload import LayerProfile
    >>> ls = [LayerProfile(name="a", forward_s=1, backward_s=1, param_bytes=1.0)]
    >>> layers_iteration_time(ls, bandwidth_bps=8.0)
    3.0

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-A and Algorithm 1.
    """
    return iteration_time(problem_from_layers(layers, bandwidth_bps=bandwidth_bps), policy or mercury)


def oracle_time(problem: IterationProblem) -> float:
    """``t_oracle = sum_l (t_bp^l + t_upd^l + t_fp^l)`` (Mercury Eq. 9): one local GPU, no communication.

    Examples
    --------
    >>> from commsched.intrajob.problem import make_problem
    >>> oracle_time(make_problem(bandwidth_bps=1.0, size_bytes=[5], bp_s=[1], fp_s=[2], upd_s=[0.5]))
    3.5

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-B, Eq. (9).
    """
    return float(np.sum(problem.bp_s) + np.sum(problem.upd_s) + np.sum(problem.fp_s))


def oracle_schedule(problem: IterationProblem) -> CommSchedule:
    """Instant communication: ``tau_push^l = tau_pull^l = tau_bp^l``; Eq. (4)-(5) then give Eq. (9).

    Examples
    --------
    >>> from commsched.intrajob.problem import make_problem
    >>> p = make_problem(bandwidth_bps=1.0, size_bytes=[9, 9], bp_s=[1, 1], fp_s=[1, 1])
    >>> iteration_time(p, oracle_schedule) == oracle_time(p)
    True

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-B, Eq. (9).
    """
    bp_end = bp_end_times(problem)
    return CommSchedule(push_start_s=bp_end, push_end_s=bp_end, pull_end_s=bp_end)


def wfbp(problem: IterationProblem) -> CommSchedule:
    """Wait-free back-propagation (Mercury Eq. 6-7), vectorised.

    ``tau_push^l = max(tau_bp^l, tau_push^{l+1}) + t_push^l`` (pushes are serial, layer L first) and
    ``tau_pull^l = tau_push^l + t_pull^l``. Reading choice: Eq. (7) is taken literally, so the pull of
    one layer may overlap the pull of the next on the downlink (the paper's model has no downlink
    contention).

    Examples
    --------
    Two layers, ``t_bp = (1, 1)``, ``t_push = (1, 2)``: ``tau_bp = (2, 1)``; layer 2 pushes in [1, 3]
    and pulls until 5; layer 1 pushes in [3, 4] and pulls until 5.

    >>> from commsched.intrajob.problem import make_problem
    >>> s = wfbp(make_problem(bandwidth_bps=8.0, size_bytes=[1, 2], bp_s=[1, 1], fp_s=[0, 0]))
    >>> s.push_end_s.tolist(), s.pull_end_s.tolist()
    ([4.0, 3.0], [5.0, 5.0])

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-B, Eq. (6)-(7); WFBP from Poseidon (Zhang et al., ATC 2017).
    """
    push = problem.push_s
    ready_rev = bp_end_times(problem)[::-1]  # processing order L..1
    push_rev = push[::-1]
    cum = np.cumsum(push_rev)
    end_rev = cum + np.maximum.accumulate(ready_rev - (cum - push_rev))
    end = end_rev[::-1].copy()
    return CommSchedule(push_start_s=end - push, push_end_s=end, pull_end_s=end + push)


def _fluid_push(problem: IterationProblem, *, preemptive: bool) -> CommSchedule:
    """Algorithm 1 of Mercury (fluid): serve the buffer by layer index (or FIFO), return push times."""
    n = problem.n_layers
    ready = bp_end_times(problem)
    left = problem.push_s.copy()
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    buf: list[int] = []  # preemptive: kept sorted ascending; FIFO: in arrival order L..1
    for layer in range(n - 1, -1, -1):  # Algorithm 1, lines 4-10
        now = float(ready[layer])
        if preemptive:
            buf.insert(0, layer)  # arrives with the smallest index so far
        else:
            buf.append(layer)
        budget = float(problem.bp_s[layer - 1]) if layer > 0 else np.inf
        while buf and (budget > 0 or left[buf[0]] == 0):  # CONSUME, lines 12-24
            head = buf[0]
            if np.isnan(start[head]):
                start[head] = now
            if budget >= left[head]:
                budget -= float(left[head])
                now += float(left[head])
                left[head] = 0.0
                end[head] = now
                buf.pop(0)
            else:
                left[head] -= budget
                budget = 0.0
    return CommSchedule(push_start_s=start, push_end_s=end, pull_end_s=end.copy())


def mercury(problem: IterationProblem) -> CommSchedule:
    """Mercury in fluid form (Algorithm 1, packet size -> 0): preemptive priority, push = pull (Eq. 8).

    The buffer is always served smallest layer index first; a newly ready front layer preempts at once;
    since packets are aggregated immediately at the PS, ``tau_pull^l = tau_push^l``.

    Examples
    --------
    Two layers, ``t_bp = (1, 1)``, ``t_push = (1, 2)``: layer 2 pushes from 1; at 2 layer 1 preempts and
    ends at 3; layer 2 resumes and ends at 4.

    >>> from commsched.intrajob.problem import make_problem
    >>> s = mercury(make_problem(bandwidth_bps=8.0, size_bytes=[1, 2], bp_s=[1, 1], fp_s=[0, 0]))
    >>> s.push_end_s.tolist()
    [3.0, 4.0]

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-B, Algorithm 1 and Eq. (8); optimal under Theorem 1.
    """
    return _fluid_push(problem, preemptive=True)


def mercury_no_preemption(problem: IterationProblem) -> CommSchedule:
    """Mercury without preemption (§V-B): Algorithm 1 with a FIFO buffer; push and pull still overlap.

    Its pushes follow WFBP's Eq. (6) but ``tau_pull^l = tau_push^l`` (Eq. 8).

    Examples
    --------
    >>> from commsched.intrajob.problem import make_problem
    >>> s = mercury_no_preemption(make_problem(bandwidth_bps=8.0, size_bytes=[1, 2], bp_s=[1, 1],
    ...                                        fp_s=[0, 0]))
    >>> s.push_end_s.tolist()
    [4.0, 3.0]

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §V-B ("Mercury W/O Preemption").
    """
    return _fluid_push(problem, preemptive=False)
