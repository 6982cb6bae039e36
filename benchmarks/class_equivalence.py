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
from numpy.typing import NDArray

from commsched.catalog import placement_registry
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.policies import communication_plans, contention_matrix
from commsched.scheduling.priority import job_facts
from commsched.scheduling.state import ClusterState, Decisions
from commsched.sim.decide import decisions as sim_decisions
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.fast import fluid as sim_fluid
from commsched.sim.rates import pacing as sim_pacing
from commsched.sim.reference.maxmin import max_min_rates_coo
from commsched.sim.results.records import Mode, SimConfig
from commsched.workload import JobId
from fig23_gaps import windowed_scenario  # the same window and jitter (run from benchmarks/)

PSPA, FULL = "crux-ps-pa", "crux-full"


def _order_signs(classes: Mapping[JobId, int], ids: list[JobId]) -> np.ndarray:
    c = np.array([classes[j] for j in ids])
    signs: np.ndarray = np.sign(c[:, None] - c[None, :])
    return signs


def _step_coo(members: list[Any]) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """The current steps of ``members`` as COO (member row, link, share) for ``max_min_rates_coo``."""
    steps = [r.traffic.steps[r.step] for r in members]
    rows = np.repeat(np.arange(len(steps)), [s.links.size for s in steps])
    return rows, np.concatenate([s.links for s in steps]), np.concatenate([s.share for s in steps])


def _why(members: list[Any], pairs: set[tuple[JobId, JobId]]) -> str:
    """Why two class assignments give different paces: the pairs of the steps in flight that share a link."""
    out = set()
    for i, r in enumerate(members):
        for q in members[i + 1 :]:
            la, lb = r.traffic.steps[r.step].links, q.traffic.steps[q.step].links
            if np.intersect1d(la, lb).size and (r.spec.id, q.spec.id) not in pairs:
                out.add("a pair outside the DAG")
    return " and ".join(sorted(out)) or "no pair outside the DAG"


class _Check:
    """The counters of one instrumented replay and the state its wrappers share."""

    def __init__(self, run: str, dump: int, n_links: int) -> None:
        self.run, self.other, self.dump = run, (FULL if run == PSPA else PSPA), dump
        self.plans = communication_plans()
        self.everything = np.ones(n_links, dtype=bool)
        self.st: Counter[str] = Counter()
        self.worst: dict[str, float] = {"rel": 0.0}
        self.alt: dict[JobId, int] = {}  # the other policy's classes at the latest decision
        self.now_classes: dict[JobId, int] = {}  # the applied policy's classes at the latest decision
        self.prev: dict[str, dict[JobId, int]] = {PSPA: {}, FULL: {}}
        self.pairs: set[tuple[JobId, JobId]] = set()  # pairs sharing a link under the latest routes
        self.seen: dict[tuple[Any, ...], tuple[float, str]] = {}

    def relabels(self, name: str, classes: Mapping[JobId, int]) -> None:
        old = self.prev[name]
        ids = [j for j in classes if j in old]
        self.st[f"{name} jobs"] += len(ids)
        if ids:
            moved = np.array([classes[j] != old[j] for j in ids])
            same_order = np.all(_order_signs(classes, ids) == _order_signs(old, ids), axis=1)
            self.st[f"{name} relabels"] += int(moved.sum())
            self.st[f"{name} relabels, order kept"] += int((moved & same_order).sum())
        self.prev[name] = dict(classes)

    def _pairs(self, state: ClusterState, mine: Decisions, cls: Mapping[str, Decisions]) -> None:
        ids = [j.id for j in state.jobs]
        pspa = {j: cls[PSPA].class_of(j) for j in ids}
        full = {j: cls[FULL].class_of(j) for j in ids}
        self.relabels(PSPA, pspa)
        self.relabels(FULL, full)
        self.pairs.clear()
        if len(ids) > 1:
            facts = [job_facts(state.topology, j, mine.routes, self.everything) for j in state.jobs]
            share = contention_matrix(state.topology, facts, self.everything)
            a, b = np.triu_indices(len(ids), 1)
            edge = share[a, b]
            su, sf = _order_signs(pspa, ids)[a, b], _order_signs(full, ids)[a, b]
            self.st["contending pairs"] += int(edge.sum())
            self.st["pairs merged"] += int((edge & (sf == 0) & (su != 0)).sum())
            self.st["pairs inverted"] += int((edge & (sf * su < 0)).sum())
            self.pairs.update((ids[i], ids[k]) for i, k in zip(*np.nonzero(share), strict=True))

    def policy(self, state: ClusterState, ctx: PolicyContext) -> Decisions:
        """The ``--run`` policy's decisions, with the other policy's computed beside them and counted."""
        mine = self.plans[self.run](state, ctx).decisions
        theirs = self.plans[self.other](state, ctx).decisions
        self.st["decisions"] += 1
        self.st["routes differ"] += int(dict(mine.routes) != dict(theirs.routes))
        self.st["rankings differ"] += int(dict(mine.ranking) != dict(theirs.ranking))
        cls = {PSPA: mine if self.run == PSPA else theirs, FULL: theirs if self.run == PSPA else mine}
        self._pairs(state, mine, cls)
        ids = [j.id for j in state.jobs]
        self.alt.clear()
        self.alt.update({j: theirs.class_of(j) for j in ids})
        self.now_classes.clear()
        self.now_classes.update({j: mine.class_of(j) for j in ids})
        return mine

    def allocation(self, pacing: sim_pacing.Pacing, members: list[Any]) -> tuple[float, str]:
        """One allocation under both class maps: the largest relative pace difference, and which side
        moves more intensity-weighted bytes."""
        rows, cols, vals = _step_coo(members)
        coo: dict[str, Any] = {
            "rows": rows,
            "cols": cols,
            "vals": vals,
            "n_groups": len(members),
            "capacity": pacing.capacity_bytes_per_s,
        }
        p1 = max_min_rates_coo(**coo, classes=np.array([r.priority_class for r in members]))
        p2 = max_min_rates_coo(**coo, classes=np.array([self.alt.get(r.spec.id, 0) for r in members]))
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
        w_full, w_pspa = (rate @ p1, rate @ p2) if self.run == FULL else (rate @ p2, rate @ p1)
        side = "more" if w_full > w_pspa * (1 + 1e-9) else "less" if w_pspa > w_full * (1 + 1e-9) else "as"
        self.st["distinct allocations"] += 1
        self.st["distinct allocations with a different pace"] += int(rel > 1e-9)
        if rel > 1e-9:
            why = _why(members, self.pairs)
            self.st[f"differing allocations: {why}"] += 1
            self.st[f"differing allocations, {FULL} moving {side} intensity-weighted bytes"] += 1
            if self.st["distinct allocations with a different pace"] <= self.dump:
                print(f"t={pacing._kernel.now:.1f} s: {why}; paces {p1.tolist()} / {p2.tolist()}")
                for r in members:
                    print(f"  {r.spec.id} class {r.priority_class}/{self.alt.get(r.spec.id, 0)}")
        return rel, side

    def count_allocation(self, rel: float, side: str) -> None:
        self.st["allocations"] += 1
        self.st["allocations with a different pace"] += int(rel > 1e-9)
        if rel > 1e-9:
            self.st[f"allocations with a different pace, {FULL} moving {side} intensity-weighted bytes"] += 1
        self.worst["rel"] = max(self.worst["rel"], rel)


def _observe(check: _Check, pacing: sim_pacing.Pacing, comp: int) -> None:
    """The allocation of ``comp``'s steps in flight, computed under both class maps and counted."""
    members = [pacing._runs[i] for i in pacing.components.get(comp, ()) if pacing._runs[i].active]
    if len(members) > 1:
        key = tuple((id(r.traffic), r.step, r.priority_class, check.alt.get(r.spec.id, 0)) for r in members)
        hit = check.seen.get(key)
        if hit is None:
            hit = check.seen[key] = check.allocation(pacing, members)
        check.count_allocation(*hit)


def _reallocate(check: _Check, original: Any) -> Any:
    """Every rate allocation after a decision is also computed under the other policy's classes."""

    def reallocate(self: sim_pacing.Pacing, comp: int) -> None:
        _observe(check, self, comp)
        original(self, comp)

    return reallocate


def _change(check: _Check, original: Any) -> Any:
    """Every rate allocation after a step starts or ends (the engine's ``Pacing._change``), likewise."""

    def change(self: sim_pacing.Pacing, r: Any, row: int) -> None:
        _observe(check, self, r.component)
        original(self, r, row)

    return change


def _untouched(check: _Check, original: Any) -> Any:
    """Count the components reset only because class numbers changed (and whether their order did)."""

    def untouched(
        self: sim_decisions.DecisionApplier, comps: list[list[int]], changed: set[int], *rest: Any
    ) -> dict[tuple[int, ...], int]:
        keep: dict[tuple[int, ...], int] = original(self, comps, changed, *rest)
        old = {tuple(idxs) for idxs in self._pacing.components.values()}
        for idxs in comps:
            if len(idxs) < 2 or tuple(idxs) not in old or tuple(idxs) in keep or changed.intersection(idxs):
                continue
            # reset only because class numbers changed: did the order among its jobs change?
            ids = [self._runs[i].spec.id for i in idxs]
            before = {self._runs[i].spec.id: self._runs[i].priority_class for i in idxs}
            after = {j: check.now_classes[j] for j in ids}
            kept = bool(np.all(_order_signs(before, ids) == _order_signs(after, ids)))
            check.st["components reset by a class change"] += 1
            check.st["components reset by a class change, order kept"] += int(kept)
        return keep

    return untouched


def _enter(check: _Check, original: Any) -> Any:
    """Every fluid steady state (fast mode, large components) is also solved under the other classes."""

    def enter(self: sim_fluid.FluidMode, idxs: list[int], now: float) -> bool:
        runs = [self._runs[i] for i in idxs]
        traffics = [r.traffic for r in runs]
        if all(t is not None for t in traffics):
            _fluid_both_ways(check, self, runs, [self._load(t) for t in traffics if t is not None])
        return bool(original(self, idxs, now))

    return enter


def _fluid_both_ways(check: _Check, fluid: sim_fluid.FluidMode, runs: list[Any], loads: list[Any]) -> None:
    st = check.st
    solve: dict[str, Any] = {
        "loads": loads,
        "compute_s": np.array([r.spec.profile.compute_s for r in runs]),
        "overlap": np.array([r.overlap for r in runs]),
        "capacity_bytes_per_s": fluid._cap,
    }
    t1 = sim_fluid.fluid_periods(**solve, classes=np.array([r.priority_class for r in runs]))
    t2 = sim_fluid.fluid_periods(**solve, classes=np.array([check.alt.get(r.spec.id, 0) for r in runs]))
    st["fluid solves"] += 1
    if (t1 is None) != (t2 is None):
        st["fluid solves converging under one class map only"] += 1
    elif t1 is not None and t2 is not None:
        rel = float(np.max(np.abs(t1 - t2) / np.maximum(t1, t2)))
        check.worst["fluid"] = max(check.worst.get("fluid", 0.0), rel)
        st["fluid solves with a different period"] += int(rel > 1e-9)
    same = [(r.spec.id, q.spec.id) for k, r in enumerate(runs) for q in runs[k + 1 :]]
    st["fluid same-class pairs sharing a link"] += sum(
        1
        for a, b in same
        if check.now_classes[a] == check.now_classes[b] and ((a, b) in check.pairs or (b, a) in check.pairs)
    )


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
    check = _Check(args.run, args.dump, len(sc.topology.links))
    sim_fluid.FluidMode._enter = _enter(check, sim_fluid.FluidMode._enter)  # type: ignore[method-assign]
    sim_pacing.Pacing.reallocate = _reallocate(check, sim_pacing.Pacing.reallocate)  # type: ignore[method-assign]
    sim_pacing.Pacing._change = _change(check, sim_pacing.Pacing._change)  # type: ignore[method-assign]
    sim_decisions.DecisionApplier._untouched = _untouched(check, sim_decisions.DecisionApplier._untouched)  # type: ignore[method-assign]
    mode = Mode(args.mode or sc.mode)
    sim = Simulation(
        topology=sc.topology,
        jobs=[SimJob(spec=j.spec, gpus=j.gpu_ids) for j in sc.jobs],
        policy=check.policy,
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
    for k, v in check.st.items():
        print(f"  {k}: {v}")
    print(f"  largest relative pace difference: {check.worst['rel']:.3g}")
    if "fluid" in check.worst:
        print(f"  largest relative fluid period difference: {check.worst['fluid']:.3g}")


if __name__ == "__main__":
    main()
