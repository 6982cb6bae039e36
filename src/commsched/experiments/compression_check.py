"""Check, at every decision of a replay, what Crux's compression does to the pairs of contending jobs.

Replays a scenario under ``crux-full`` with the policy wrapped: at each decision with more than
``levels`` running jobs it rebuilds the contention DAG over the chosen routes (as the policy does) and
counts the components larger than ``levels``, the contending pairs, and among them the pairs that the
compression put in the same class or in inverted order. Same-class pairs share bandwidth max-min
fairly where unique priorities (``crux-ps-pa``) would order them; inverted pairs would be an invalid
compression.

Run: ``python -m commsched.experiments.compression_check crux-fig23-clos-4agg [--hours 24] [--all-links]``
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from commsched.catalog import placement_registry
from commsched.io.scenario import Scenario
from commsched.io.shipped import resolve_scenario
from commsched.scheduling.interfaces import PolicyContext, PolicyFn
from commsched.scheduling.policies import communication_plans, contention_matrix
from commsched.scheduling.priority import job_facts, network_link_mask
from commsched.scheduling.state import ClusterState, Decisions
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.results.records import Mode, SimConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class CompressionCheck:
    """What the compression did over a replay (counts over every decision with more jobs than classes)."""

    scenario: str
    priority_levels: int
    utilisation: float
    cpu_s: float
    decisions: int
    big: int
    largest: int
    pairs: int
    same: int
    inverted: int


def _windowed(sc: Scenario, hours: float | None) -> Scenario:
    if hours is None:
        return sc
    window = hours * 3600.0
    return replace(sc, jobs=tuple(j for j in sc.jobs if j.spec.arrival_s < window), horizon_s=window)


def _checked(stats: dict[str, int], net: NDArray[np.bool_], seen: NDArray[np.bool_]) -> PolicyFn:
    plan = communication_plans()["crux-full"]

    def policy(state: ClusterState, ctx: PolicyContext) -> Decisions:
        d = plan(state, ctx).decisions
        order = sorted(d.ranking, key=lambda j: d.ranking[j])
        if len(order) <= state.priority_levels:
            return d
        by_id = {j.id: j for j in state.jobs}
        facts = [job_facts(state.topology, by_id[jid], d.routes, net) for jid in order]
        share = contention_matrix(state.topology, facts, seen)
        _, labels = connected_components(sparse.csr_matrix(share), directed=False)
        sizes = np.bincount(labels)
        lv = np.array([d.class_of(j) for j in order])
        a, b = np.triu_indices(len(order), 1)  # a is ranked above b
        edge = share[a, b]
        stats["decisions"] += 1
        stats["big"] += int((sizes > state.priority_levels).any())
        stats["largest"] = max(stats["largest"], int(sizes.max()))
        stats["pairs"] += int(edge.sum())
        stats["same"] += int((edge & (lv[a] == lv[b])).sum())
        stats["inverted"] += int((edge & (lv[a] > lv[b])).sum())
        return d

    return policy


def check_compression(scenario: Scenario, *, all_links: bool = False) -> CompressionCheck:
    """Replay ``scenario`` under ``crux-full``, checking the compression at every decision.

    ``all_links``: count pairs sharing any link, links inside hosts included (the DAG has network
    links only).
    """
    sc = scenario
    net = network_link_mask(sc.topology)
    stats = {"decisions": 0, "big": 0, "largest": 0, "pairs": 0, "same": 0, "inverted": 0}
    sim = Simulation(
        topology=sc.topology,
        jobs=[SimJob(spec=j.spec, gpus=j.gpu_ids) for j in sc.jobs],
        policy=_checked(stats, net, np.ones_like(net) if all_links else net),
        placement=placement_registry().get(sc.placement, where="placement"),
        config=SimConfig(horizon_s=sc.horizon_s, mode=Mode(sc.mode), seed=sc.seed, warmup_s=sc.warmup_s),
        policy_name="crux-full",
        priority_levels=sc.priority_levels,
        backfill=sc.backfill,
    )
    c0 = time.process_time()
    res = sim.run()
    cpu_s = time.process_time() - c0
    return CompressionCheck(
        scenario=sc.name,
        priority_levels=sc.priority_levels,
        utilisation=res.gpu_utilization,
        cpu_s=cpu_s,
        **stats,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check on the command line's scenario and print one line."""
    ap = argparse.ArgumentParser(
        prog="python -m commsched.experiments.compression_check", description=__doc__.splitlines()[0]
    )
    ap.add_argument("scenario")
    ap.add_argument("--hours", type=float, default=None, help="only jobs arriving in the first hours")
    ap.add_argument("--all-links", action="store_true", help="count pairs sharing any link, inside hosts too")
    args = ap.parse_args(argv)
    c = check_compression(_windowed(resolve_scenario(args.scenario), args.hours), all_links=args.all_links)
    print(
        f"{c.scenario}: crux-full utilisation {c.utilisation:.4f} ({c.cpu_s:.0f} CPU-s); "
        f"{c.decisions} decisions with more than {c.priority_levels} jobs, {c.big} with a "
        f"component larger than {c.priority_levels} (largest {c.largest}); {c.pairs} "
        f"contending pairs, {c.same} in the same class, {c.inverted} inverted"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
