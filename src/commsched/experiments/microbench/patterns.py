"""The space the microbenchmark enumerates: Agg choices and relation patterns (crux-spec §6.8).

A *choice* gives every job the Agg its cross-ToR flows take (jobs that stay under one ToR: 0); the
first crossing job is on Agg 0 (results are invariant under swapping the two Aggs). A *pattern* is
the relation (higher / equal / lower class) of every pair of jobs that share a link: with strict
priority between classes and max-min sharing inside one, the rates depend on nothing else, so one
level assignment per distinct pattern covers every (ranking, compression) pair. Components of the
contention graph do not interact and are enumerated apart.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.4; crux-spec §6.8.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from commsched.experiments.microbench.cases import Case
from commsched.scheduling.policies import contention_matrix
from commsched.scheduling.priority import JobFacts
from commsched.scheduling.state import PlacedJob
from commsched.topology import Topology

__all__ = ["Choice", "assignments", "choices", "components", "crosses", "pattern", "sharing"]


Choice = tuple[int, ...]  # Agg index per job (0 for jobs that do not cross ToRs)


def sharing(facts: Sequence[JobFacts], network: np.ndarray, topo: Topology) -> np.ndarray:
    """Whether two jobs share a network link, per pair (the compression's contention matrix)."""
    return contention_matrix(topo, facts, network)


def pattern(
    comp: Sequence[int], levels: Sequence[int], facts: Sequence[JobFacts], network: np.ndarray
) -> tuple[int, ...]:
    """The relation (sign of the level difference) of every pair of the component that shares a link."""
    links = [set(facts[i].traffic.link_ids[network[facts[i].traffic.link_ids]].tolist()) for i in comp]
    out = []
    for a, b in itertools.combinations(range(len(comp)), 2):
        if links[a] & links[b]:
            out.append(int(np.sign(levels[a] - levels[b])))
    return tuple(out)


def components(share: np.ndarray) -> list[tuple[int, ...]]:
    """The connected components of the contention graph, each sorted, in order of their first job."""
    n = share.shape[0]
    seen: set[int] = set()
    comps = []
    for s in range(n):
        if s in seen:
            continue
        stack, comp = [s], []
        seen.add(s)
        while stack:
            a = stack.pop()
            comp.append(a)
            for b in np.flatnonzero(share[a]).tolist():
                if b not in seen:
                    seen.add(b)
                    stack.append(b)
        comps.append(tuple(sorted(comp)))
    return comps


def assignments(comp: Sequence[int], share: np.ndarray, levels: int) -> list[tuple[int, ...]]:
    """One level assignment per distinct relation pattern on the component's contention edges."""
    edges = [(a, b) for a, b in itertools.combinations(range(len(comp)), 2) if share[comp[a], comp[b]]]
    seen: set[tuple[int, ...]] = set()
    out = []
    for lv in itertools.product(range(min(levels, len(comp))), repeat=len(comp)):
        pat = tuple(int(np.sign(lv[a] - lv[b])) for a, b in edges)
        if pat not in seen:
            seen.add(pat)
            out.append(lv)
    return out


def choices(cross: Sequence[bool]) -> list[Choice]:
    """Every Agg choice of the crossing jobs, the first crossing job on Agg 0."""
    idx = [i for i, c in enumerate(cross) if c]
    out = []
    for bits in itertools.product((0, 1), repeat=max(0, len(idx) - 1)):
        ch = [0] * len(cross)
        for i, b in zip(idx[1:], bits, strict=True):
            ch[i] = b
        out.append(tuple(ch))
    return out


def crosses(case: Case, job: PlacedJob) -> bool:
    """Whether the job's hosts sit under more than one ToR."""
    tors = {case.topology.host_of(g).tors[0] for g in job.gpus}
    return len(tors) > 1
