"""Crux's optimality microbenchmark (Crux §4.4, Fig. 16): each mechanism against the enumerated optimum.

Cases (``MicrobenchConfig``; crux-spec §6.8)
--------------------------------------------
* A two-layer Clos with ``T`` ToRs (2-4, drawn), 2 Aggs, ``h`` hosts per ToR with ``T h <= 20``
  and at least 10 hosts; hosts are ``a100_8gpu_4nic`` (8 GPUs, 4 x 200 Gb/s NICs); each ToR has one
  200 Gb/s uplink per Agg, so two NIC pairs under different ToRs have exactly two equal-cost paths
  (one per Agg) and the fabric is oversubscribed (ToR-Agg links are the contended resource).
* 5 jobs of 2-4 whole hosts each (8 GPUs per host), hosts drawn at random without replacement;
  ring all-reduce over the job's GPUs host by host in host-id order. Synthetic profiles: compute
  ``c ~ U(0.1, 0.5)`` s, overlap ``o`` in {0.5, 0.75, 1}, gradient size chosen so that the ring's
  per-link time at 200 Gb/s is ``rho c`` with ``rho ~ U(0.2, 1.2)``.
* 3 priority levels.

What is enumerated (tractability choices)
-----------------------------------------
* **Paths**: one Agg per job for all its cross-ToR flows (``PathSettings(granularity="job")``):
  ``2^x`` assignments for the ``x`` jobs that cross ToRs, halved by the Agg symmetry (the first
  crossing job on Agg 0; results are invariant under swapping the two Aggs).
* **Priorities**: with 3 levels only class assignments matter, and with strict priority between
  classes and max-min sharing inside one, the rates depend only on the relation (higher / equal /
  lower) of every pair of jobs that *share a link*. So the enumeration runs over the distinct
  relation patterns on the contention edges realisable with at most 3 levels (one representative
  assignment each), per connected component of the contention graph (components do not interact).
  Every (ranking, valid compression) pair is such an assignment and every assignment is the
  compression of some ranking, so the optimum over assignments is the optimum over rankings and
  compressions.
* **Scoring**: the simulator in ``fast`` mode, one run per (component, paths, pattern), memoised;
  horizon ``warmup + 8`` periods of the component's slowest job (standalone estimate), averages
  after a warm-up of 2 periods; utilisation = busy GPU-seconds / (allocated GPUs x window), summed
  over components weighted by their GPUs (over the allocated GPUs of the case).

Ablation (crux-spec §6.8: the other two mechanisms at their optimum)
--------------------------------------------------------------------
* **path_selection**: each method's per-job Agg choice, scored with the best pattern per component.
  Methods: ``crux`` (intensity order, least congested), ``taccl-star`` (arrival order, least
  congested), ``balanced-ecmp`` (arrival order, fewest flows), ``ecmp`` (a seeded random Agg per job).
* **priority_assignment**: optimal paths; each method's ranking (under those paths), scored with the
  best compression *valid for that ranking*. Methods: ``crux``, ``sincronia``, ``varys``,
  ``taccl-star``.
* **compression**: optimal paths and the optimal ranking (jobs sorted by their optimal class, ties
  by Crux's ``P_j`` order); each method's 3-level compression of it. Methods: ``crux`` (Max K-Cut,
  ``m = 10`` BFS orders), ``sincronia`` (Sincronia-style split), ``varys`` (Varys-style split).

Ratios are method / optimum; every method lies inside the enumerated space, so ratios are <= 1 up to
the fast mode's extrapolation noise.

The random cases live in :mod:`.cases`, the enumerated space in :mod:`.patterns`, the scoring in
:mod:`.scoring`, the methods of every mechanism in :mod:`.methods` and the runs in :mod:`.run`;
:mod:`.paper` runs it at paper scale.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.4 (Fig. 16: 97.69 / 97.24 / 97.12 % of optimal);
   crux-spec §6.8.
"""

from __future__ import annotations

from commsched.experiments.microbench.run import (
    MECHANISMS,
    NIC_BPS,
    CaseResult,
    MicrobenchConfig,
    MicrobenchSummary,
    make_case,
    run_case,
    run_microbench,
    summarise,
)

__all__ = [
    "MECHANISMS",
    "NIC_BPS",
    "CaseResult",
    "MicrobenchConfig",
    "MicrobenchSummary",
    "make_case",
    "run_case",
    "run_microbench",
    "summarise",
]
