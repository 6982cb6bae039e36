"""Check, at every decision of a replay, what Crux's compression does to the pairs of contending jobs.

Replays a scenario under ``crux-full`` with the policy wrapped: at each decision with more than
``levels`` running jobs it rebuilds the contention DAG over the chosen routes (as the policy does) and
counts the components larger than ``levels``, the contending pairs, and among them the pairs that the
compression put in the same class or in inverted order. Same-class pairs share bandwidth max-min
fairly where unique priorities (``crux-ps-pa``) would order them; inverted pairs would be an invalid
compression.

Run: ``.venv/bin/python benchmarks/compression_check.py crux-fig23-clos-4agg [--hours 24]``
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from commsched.catalog import placement_registry
from commsched.io.shipped import resolve_scenario
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.policies import communication_plans, contention_matrix
from commsched.scheduling.priority import job_facts, network_link_mask
from commsched.scheduling.state import ClusterState, Decisions
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.records import Mode, SimConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--hours", type=float, default=None, help="only jobs arriving in the first hours")
    ap.add_argument(
        "--all-links",
        action="store_true",
        help="count pairs sharing any link, links inside hosts included (the DAG has network links only)",
    )
    args = ap.parse_args()
    sc = resolve_scenario(args.scenario)
    if args.hours is not None:
        window = args.hours * 3600.0
        sc = replace(sc, jobs=tuple(j for j in sc.jobs if j.spec.arrival_s < window), horizon_s=window)
    plan = communication_plans()["crux-full"]
    net = network_link_mask(sc.topology)
    seen = np.ones_like(net) if args.all_links else net
    stats = {"decisions": 0, "big": 0, "largest": 0, "pairs": 0, "same": 0, "inverted": 0}

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

    sim = Simulation(
        topology=sc.topology,
        jobs=[SimJob(spec=j.spec, gpus=j.gpu_ids) for j in sc.jobs],
        policy=policy,
        placement=placement_registry().get(sc.placement, where="placement"),
        config=SimConfig(horizon_s=sc.horizon_s, mode=Mode(sc.mode), seed=sc.seed, warmup_s=sc.warmup_s),
        policy_name="crux-full",
        priority_levels=sc.priority_levels,
        backfill=sc.backfill,
    )
    c0 = time.process_time()
    res = sim.run()
    print(
        f"{sc.name}: crux-full utilisation {res.gpu_utilization:.4f} ({time.process_time() - c0:.0f} CPU-s); "
        f"{stats['decisions']} decisions with more than {sc.priority_levels} jobs, {stats['big']} with a "
        f"component larger than {sc.priority_levels} (largest {stats['largest']}); {stats['pairs']} "
        f"contending pairs, {stats['same']} in the same class, {stats['inverted']} inverted"
    )


if __name__ == "__main__":
    main()
