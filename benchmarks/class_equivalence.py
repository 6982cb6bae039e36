"""Are ``crux-full`` and ``crux-ps-pa`` the same network decision? Check it at every decision of a replay.

Replays a scenario under one policy (``--run``, default ``crux-ps-pa``) and, at every decision, computes
both plans for the same cluster state and policy context: ``crux-ps-pa`` (one class per job) and
``crux-full`` (the ranking compressed to ``K`` levels). It counts:

* decisions whose routes or rankings differ between the two (they should not: only classes differ);
* contending pairs (sharing any link, links inside hosts included) that the compression puts in the
  same class, or in the inverted order, relative to unique classes;
* every rate allocation of the engine (strict priority between classes, max-min within a class, the
  same ``max_min_rates_coo`` call the simulator makes, on the steps in flight) computed under both
  class assignments: how many give some job a different pace, and by how much;
* class *re-labellings* per policy: jobs whose class number changes from one decision to the next,
  and among them those whose order relative to every other running job does not change;
* engine components (several jobs sharing links) that a decision resets in fast mode (the periodic
  regime is dropped and searched again) only because class numbers changed, while the order of their
  jobs among themselves did not.
* of the allocations that differ, how many move more, as many or fewer intensity-weighted bytes per
  second (``sum_j I_j x rate_j``, what Crux's ranking maximises) under ``crux-full``'s classes;
* every fluid steady state (fast mode, components of ``fluid_min_jobs`` jobs or more) solved again
  under the other policy's classes: how many give some job another period, and how many pairs of
  jobs of one class sharing a link the fluid components hold.

Run: ``.venv/bin/python benchmarks/class_equivalence.py crux-fig23-clos-4agg [--run crux-full]
[--hours 6] [--jitter-s 1 --jitter-seed 1] [--fluid-min-jobs 0]`` (see docs/fig23-gaps.md).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from commsched.catalog import placement_registry
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.policies import communication_plans, contention_matrix
from commsched.scheduling.priority import job_facts
from commsched.scheduling.state import ClusterState, Decisions
from commsched.sim import decisions as sim_decisions
from commsched.sim import fluid as sim_fluid
from commsched.sim import pacing as sim_pacing
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.rates import max_min_rates_coo
from commsched.sim.records import Mode, SimConfig
from commsched.workload import JobId
from fig23_gaps import windowed_scenario  # the same window and jitter (run from benchmarks/)

PSPA, FULL = "crux-ps-pa", "crux-full"


def _order_signs(classes: Mapping[JobId, int], ids: list[JobId]) -> np.ndarray:
    c = np.array([classes[j] for j in ids])
    signs: np.ndarray = np.sign(c[:, None] - c[None, :])
    return signs


def _why(members: list[Any], pairs: set[tuple[JobId, JobId]]) -> str:
    """Why two class assignments give different paces: the pairs of the steps in flight that share a link."""
    out = set()
    for i, r in enumerate(members):
        for q in members[i + 1 :]:
            la, lb = r.traffic.steps[r.step].links, q.traffic.steps[q.step].links
            if np.intersect1d(la, lb).size and (r.spec.id, q.spec.id) not in pairs:
                stale = r.traffic is not r.next_traffic or q.traffic is not q.next_traffic
                out.add(
                    "a pair sharing a link on a route being replaced" if stale else "a pair outside the DAG"
                )
    return " and ".join(sorted(out)) or "no pair outside the DAG"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--run", choices=(PSPA, FULL), default=PSPA, help="the policy whose replay is run")
    ap.add_argument("--hours", type=float, default=None, help="only jobs arriving in the first hours")
    ap.add_argument("--jitter-s", type=float, default=0.0)
    ap.add_argument("--jitter-seed", type=int, default=1)
    ap.add_argument("--mode", choices=("fast", "exact"), default=None, help="override the scenario's mode")
    ap.add_argument("--fluid-min-jobs", type=int, default=None, help="override SimConfig.fluid_min_jobs")
    ap.add_argument("--dump", type=int, default=0, help="print the first DUMP allocations that differ")
    args = ap.parse_args()
    sc = windowed_scenario(args.scenario, args.hours, args.jitter_s, args.jitter_seed)
    other = FULL if args.run == PSPA else PSPA
    plans = communication_plans()
    everything = np.ones(len(sc.topology.links), dtype=bool)
    st: Counter[str] = Counter()
    worst: dict[str, float] = {"rel": 0.0}
    alt: dict[JobId, int] = {}  # the other policy's classes at the latest decision
    now_classes: dict[JobId, int] = {}  # the applied policy's classes at the latest decision
    prev: dict[str, dict[JobId, int]] = {PSPA: {}, FULL: {}}
    pairs: set[tuple[JobId, JobId]] = set()  # the pairs sharing a link under the latest decision's routes

    def relabels(name: str, classes: Mapping[JobId, int]) -> None:
        old = prev[name]
        ids = [j for j in classes if j in old]
        st[f"{name} jobs"] += len(ids)
        if ids:
            moved = np.array([classes[j] != old[j] for j in ids])
            same_order = np.all(_order_signs(classes, ids) == _order_signs(old, ids), axis=1)
            st[f"{name} relabels"] += int(moved.sum())
            st[f"{name} relabels, order kept"] += int((moved & same_order).sum())
        prev[name] = dict(classes)

    def policy(state: ClusterState, ctx: PolicyContext) -> Decisions:
        mine = plans[args.run](state, ctx).decisions
        theirs = plans[other](state, ctx).decisions
        st["decisions"] += 1
        st["routes differ"] += int(dict(mine.routes) != dict(theirs.routes))
        st["rankings differ"] += int(dict(mine.ranking) != dict(theirs.ranking))
        ids = [j.id for j in state.jobs]
        cls = {PSPA: mine if args.run == PSPA else theirs, FULL: theirs if args.run == PSPA else mine}
        pspa = {j: cls[PSPA].class_of(j) for j in ids}
        full = {j: cls[FULL].class_of(j) for j in ids}
        relabels(PSPA, pspa)
        relabels(FULL, full)
        if len(ids) > 1:
            facts = [job_facts(state.topology, j, mine.routes, everything) for j in state.jobs]
            share = contention_matrix(state.topology, facts, everything)
            a, b = np.triu_indices(len(ids), 1)
            edge = share[a, b]
            su, sf = _order_signs(pspa, ids)[a, b], _order_signs(full, ids)[a, b]
            st["contending pairs"] += int(edge.sum())
            st["pairs merged"] += int((edge & (sf == 0) & (su != 0)).sum())
            st["pairs inverted"] += int((edge & (sf * su < 0)).sum())
        pairs.clear()
        if len(ids) > 1:
            pairs.update((ids[i], ids[k]) for i, k in zip(*np.nonzero(share), strict=True))
        alt.clear()
        alt.update({j: theirs.class_of(j) for j in ids})
        now_classes.clear()
        now_classes.update({j: mine.class_of(j) for j in ids})
        return mine

    # instrument the engine: every rate allocation is also computed under the other policy's classes
    original_reallocate = sim_pacing.Pacing.reallocate
    seen: dict[tuple[Any, ...], tuple[float, str]] = {}

    def reallocate(self: sim_pacing.Pacing, comp: int) -> None:
        members = [self._runs[i] for i in self.components.get(comp, ()) if self._runs[i].active]
        if len(members) > 1:
            for r in members:
                self.settle(r)
            key = tuple((id(r.traffic), r.step, r.priority_class, alt.get(r.spec.id, 0)) for r in members)
            hit = seen.get(key)
            if hit is None:
                rows, cols, vals = sim_pacing.step_coo(members)
                coo: dict[str, Any] = {
                    "rows": rows,
                    "cols": cols,
                    "vals": vals,
                    "n_groups": len(members),
                    "capacity": self.capacity_bytes_per_s,
                }
                p1 = max_min_rates_coo(**coo, classes=np.array([r.priority_class for r in members]))
                p2 = max_min_rates_coo(**coo, classes=np.array([alt.get(r.spec.id, 0) for r in members]))
                rel = float(np.max(np.abs(p1 - p2) / np.maximum(np.maximum(p1, p2), 1e-300)))
                # Crux's aim: intensity-weighted bytes per second (GPU work the transfers unblock)
                rate = np.array(
                    [
                        r.intensity * float(np.sum(s.bytes_per_rep)) / s.max_flow_bytes
                        for r in members
                        if r.traffic is not None
                        for s in (r.traffic.steps[r.step],)
                    ]
                )
                w_full, w_pspa = (rate @ p1, rate @ p2) if args.run == FULL else (rate @ p2, rate @ p1)
                side = (
                    "more"
                    if w_full > w_pspa * (1 + 1e-9)
                    else "less"
                    if w_pspa > w_full * (1 + 1e-9)
                    else "as"
                )
                seen[key] = hit = (rel, side)
                st["distinct allocations"] += 1
                st["distinct allocations with a different pace"] += int(rel > 1e-9)
                if rel > 1e-9:
                    why = _why(members, pairs)
                    st[f"differing allocations: {why}"] += 1
                    st[f"differing allocations, {FULL} moving {side} intensity-weighted bytes"] += 1
                    if st["distinct allocations with a different pace"] <= args.dump:
                        print(f"t={self._kernel.now:.1f} s: {why}; paces {p1.tolist()} / {p2.tolist()}")
                        for r in members:
                            print(
                                f"  {r.spec.id} class {r.priority_class}/{alt.get(r.spec.id, 0)} "
                                f"stale route {r.traffic is not r.next_traffic}"
                            )
            rel, side = hit
            st["allocations"] += 1
            st["allocations with a different pace"] += int(rel > 1e-9)
            if rel > 1e-9:
                st[f"allocations with a different pace, {FULL} moving {side} intensity-weighted bytes"] += 1
            worst["rel"] = max(worst["rel"], rel)
        original_reallocate(self, comp)

    original_untouched = sim_decisions.DecisionApplier._untouched

    def untouched(
        self: sim_decisions.DecisionApplier, comps: list[list[int]], changed: set[int], *rest: Any
    ) -> dict[tuple[int, ...], int]:
        keep = original_untouched(self, comps, changed, *rest)
        old = {tuple(idxs) for idxs in self._pacing.components.values()}
        for idxs in comps:
            if len(idxs) < 2 or tuple(idxs) not in old or tuple(idxs) in keep:
                continue
            if changed.intersection(idxs):
                continue
            # reset only because class numbers changed: did the order among its jobs change?
            ids = [self._runs[i].spec.id for i in idxs]
            before = {self._runs[i].spec.id: self._runs[i].priority_class for i in idxs}
            after = {j: now_classes[j] for j in ids}
            kept = bool(np.all(_order_signs(before, ids) == _order_signs(after, ids)))
            st["components reset by a class change"] += 1
            st["components reset by a class change, order kept"] += int(kept)
        return keep

    # and every fluid steady state (fast mode, large components) is also solved under the other classes
    original_enter = sim_fluid.FluidMode._enter

    def enter(self: sim_fluid.FluidMode, idxs: list[int], now: float) -> bool:
        runs = [self._runs[i] for i in idxs]
        traffics = [r.next_traffic or r.traffic for r in runs]
        if all(t is not None for t in traffics):
            loads = [self._load(t) for t in traffics if t is not None]
            args: dict[str, Any] = {
                "loads": loads,
                "compute_s": np.array([r.spec.profile.compute_s for r in runs]),
                "overlap": np.array([r.overlap for r in runs]),
                "capacity_bytes_per_s": self._cap,
            }
            t1 = sim_fluid.fluid_periods(**args, classes=np.array([r.priority_class for r in runs]))
            t2 = sim_fluid.fluid_periods(**args, classes=np.array([alt.get(r.spec.id, 0) for r in runs]))
            st["fluid solves"] += 1
            if (t1 is None) != (t2 is None):
                st["fluid solves converging under one class map only"] += 1
            elif t1 is not None and t2 is not None:
                rel = float(np.max(np.abs(t1 - t2) / np.maximum(t1, t2)))
                worst["fluid"] = max(worst.get("fluid", 0.0), rel)
                st["fluid solves with a different period"] += int(rel > 1e-9)
            same = [(r.spec.id, q.spec.id) for k, r in enumerate(runs) for q in runs[k + 1 :]]
            st["fluid same-class pairs sharing a link"] += sum(
                1
                for a, b in same
                if now_classes[a] == now_classes[b] and ((a, b) in pairs or (b, a) in pairs)
            )
        return original_enter(self, idxs, now)

    sim_fluid.FluidMode._enter = enter  # type: ignore[method-assign]
    sim_pacing.Pacing.reallocate = reallocate  # type: ignore[method-assign]
    sim_decisions.DecisionApplier._untouched = untouched  # type: ignore[method-assign,assignment]
    mode = Mode(args.mode or sc.mode)
    sim = Simulation(
        topology=sc.topology,
        jobs=[SimJob(spec=j.spec, gpus=j.gpu_ids) for j in sc.jobs],
        policy=policy,
        placement=placement_registry().get(sc.placement, where="placement"),
        config=SimConfig(
            horizon_s=sc.horizon_s,
            mode=mode,
            seed=sc.seed,
            warmup_s=sc.warmup_s,
            **({} if args.fluid_min_jobs is None else {"fluid_min_jobs": args.fluid_min_jobs}),
        ),
        policy_name=args.run,
        priority_levels=sc.priority_levels,
        backfill=sc.backfill,
    )
    c0 = time.process_time()
    res = sim.run()
    print(
        f"{sc.name} ({len(sc.jobs)} jobs, {sc.horizon_s / 3600:g} h, {mode.value}), replay of {args.run}: "
        f"utilisation {res.gpu_utilization:.4f} ({time.process_time() - c0:.0f} CPU-s)"
    )
    for k, v in st.items():
        print(f"  {k}: {v}")
    print(f"  largest relative pace difference: {worst['rel']:.3g}")
    if "fluid" in worst:
        print(f"  largest relative fluid period difference: {worst['fluid']:.3g}")


if __name__ == "__main__":
    main()
