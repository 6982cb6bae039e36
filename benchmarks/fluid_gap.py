"""Where two policies' replays part: run both with the fluid on or off, find the first decision that differs.

Runs two policies (default ``crux-ps-pa`` and ``crux-full``) on a scenario in fast mode, one after the
other in this process, with ``SimConfig.fluid_min_jobs`` set by ``--fluid-min-jobs`` (0: no fluid). It
prints each run's GPU utilisation, the gap, whether the two runs are identical job by job, the first
decision at which the running jobs' progress or placements differ (and the jobs that differ there),
and the fluid's activity in each run: steady states solved, jobs entering and leaving it, and job-hours
run as a fluid.

``--routes-at-once`` is now what the engine does itself (a decision's new routes apply at once to a
step in flight) and changes nothing; it was the experiment that led there. Pairs of jobs that shared a
link only through a step left on its old routes were the one place where the engine's rates could
depend on more than the order of the jobs sharing a link in the decided routes; with them gone, two
policies whose classes order every such pair alike must give the same replay, fluid or not.

``--dag-with-routes-in-flight`` is the other experiment: the routes stay as the engine models them,
but the compression's contention DAG (``policies.common.contention_matrix``) gets, for every job, the
links of its routes before the decision as well as those the decision gives it, read from the engine
(a step may still be in flight on them; a policy sees only ``ClusterState``, which does not carry them).

Run: ``.venv/bin/python benchmarks/fluid_gap.py crux-fig23-clos-4agg [--fluid-min-jobs 8]
[--routes-at-once | --dag-with-routes-in-flight] [--jitter-s 1 --jitter-seed N]`` (see
docs/fig23-gaps.md).
"""

from __future__ import annotations

import argparse
import functools
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from commsched.api import runner
from commsched.catalog import placement_registry, policy_registry
from commsched.io.scenario import Scenario
from commsched.scheduling.policies import common as policies_common
from commsched.sim.decide import decisions as sim_decisions
from commsched.sim.fast import fluid as sim_fluid
from commsched.sim.results.records import JobResult, Mode, SimConfig, SimResult
from fig23_gaps import windowed_scenario  # the same window and jitter (run from benchmarks/)

#: per decision: its time and, per running job, (id, GPUs, whole iterations done)
Digest = tuple[float, tuple[tuple[str, tuple[str, ...], int], ...]]


@dataclass(kw_only=True)
class Trace:
    """What one replay did, decision by decision."""

    digests: list[Digest] = field(default_factory=list)
    fluid: Counter[str] = field(default_factory=Counter)
    #: per job: seconds run as a fluid
    fluid_s: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    last: tuple[float, tuple[str, ...]] = (0.0, ())  # the latest decision's time and fluid jobs
    #: at a decision: the links of each job's routes before it (where a step may be in flight)
    in_flight: dict[str, NDArray[np.int64]] = field(default_factory=dict)

    def fluid_until(self, now: float, jobs: tuple[str, ...]) -> None:
        t0, before = self.last
        for j in before:
            self.fluid_s[j] += now - t0
        self.last = (now, jobs)


def _with_routes_in_flight(in_flight: dict[str, NDArray[np.int64]]) -> Any:
    """``contention_matrix`` over each job's network links under the decided routes and under the
    routes of its step in flight (read from the engine at the decision: what a policy cannot see)."""

    def make(orig: Any) -> Any:
        def run(topology: Any, facts: Sequence[Any], network: NDArray[np.bool_]) -> NDArray[np.bool_]:
            sets = []
            for f in facts:
                ids = f.traffic.link_ids.astype(np.int64)
                old = in_flight.get(str(f.job.id))
                u = np.union1d(ids, old) if old is not None else ids
                sets.append(u[network[u]])
            n = len(facts)
            share = np.zeros((n, n), dtype=bool)
            for i in range(n):
                for k in range(i + 1, n):
                    share[i, k] = share[k, i] = bool(np.intersect1d(sets[i], sets[k]).size)
            return share

        return run

    return make


def _running(applier: sim_decisions.DecisionApplier) -> list[int]:
    """The running jobs' indices, in start order."""
    return sorted(applier._order, key=applier._order.__getitem__)


def _decide(trace: Trace, orig: Any) -> Any:
    def run(self: sim_decisions.DecisionApplier) -> None:
        trace.in_flight.clear()
        for i in _running(self):
            r = self._runs[i]
            # the routes in force now (a policy is told them only for persistent jobs)
            if r.traffic is not None:
                trace.in_flight[str(r.spec.id)] = r.traffic.link_ids.astype(np.int64)
        orig(self)
        now, fl = self._kernel.now, self._fluid
        assert isinstance(fl, sim_fluid.FluidMode)  # the engine's fluid mode, behind the decisions' protocol
        trace.fluid_until(now, tuple(str(self._runs[i].spec.id) for i in fl.state))
        jobs = []
        for i in _running(self):
            r = self._runs[i]
            done = fl.state[i][1] if fl.is_fluid(i) else r.iterations_done
            gpus = tuple(str(g) for g in r.placed.gpus) if r.placed is not None else ()
            jobs.append((str(r.spec.id), gpus, int(done + 1e-9)))
        trace.digests.append((now, tuple(sorted(jobs))))

    return run


def _enter(trace: Trace, orig: Any) -> Any:
    def run(self: sim_fluid.FluidMode, idxs: list[int], now: float) -> bool:
        fresh = sum(1 for i in idxs if not self.is_fluid(i))
        ok = bool(orig(self, idxs, now))
        trace.fluid["solves"] += 1
        trace.fluid["solves that failed (left in detail)"] += int(not ok)
        trace.fluid["jobs entering"] += fresh if ok else 0
        trace.fluid["largest fluid component"] = max(trace.fluid["largest fluid component"], len(idxs))
        return ok

    return run


def _leave(trace: Trace, orig: Any) -> Any:
    def run(self: sim_fluid.FluidMode, r: Any, now: float) -> None:
        trace.fluid["jobs leaving"] += 1
        orig(self, r, now)

    return run


def _replay(
    sc: Scenario, policy: str, fluid_min_jobs: int, at_once: bool, dag_in_flight: bool
) -> tuple[SimResult, Trace]:
    """One fast-mode replay, instrumented (the engine's methods are wrapped for this run only)."""
    trace = Trace()
    originals: dict[tuple[Any, str], Any] = {}

    def wrap(owner: Any, name: str, make: Any) -> None:
        originals[(owner, name)] = getattr(owner, name)
        setattr(owner, name, make(originals[(owner, name)]))

    wrap(sim_decisions.DecisionApplier, "decide", functools.partial(_decide, trace))
    wrap(sim_fluid.FluidMode, "_enter", functools.partial(_enter, trace))
    wrap(sim_fluid.FluidMode, "_leave", functools.partial(_leave, trace))
    del at_once  # new routes apply at once in the engine itself now
    if dag_in_flight:
        wrap(policies_common, "contention_matrix", _with_routes_in_flight(trace.in_flight))
    wrap(runner, "SimConfig", lambda cls: functools.partial(cls, fluid_min_jobs=fluid_min_jobs))
    try:
        bundle = policy_registry().get(policy, where="policy")
        res = runner.run_bundle(
            sc,
            bundle,
            placement=bundle.placement or placement_registry().get(sc.placement, where="placement"),
            mode=Mode.FAST,
            seed=sc.seed,
        )
    finally:
        for (owner, name), fn in originals.items():
            setattr(owner, name, fn)
    trace.fluid_until(res.sim_time_s, ())
    return res, trace


def _first_difference(a: list[Digest], b: list[Digest]) -> str:
    """The first decision at which two replays differ, and how."""
    for k, ((ta, ja), (tb, jb)) in enumerate(zip(a, b, strict=False)):
        if abs(ta - tb) > 1e-6:
            return f"decision {k}: at {ta:.1f} s against {tb:.1f} s"
        if ja != jb:
            da, db = dict((j, (g, n)) for j, g, n in ja), dict((j, (g, n)) for j, g, n in jb)
            diff = sorted(j for j in set(da) | set(db) if da.get(j) != db.get(j))
            parts = []
            for j in diff[:4]:
                x, y = da.get(j), db.get(j)
                what = (
                    "running in one only"
                    if x is None or y is None
                    else (f"iterations {x[1]}/{y[1]}" if x[0] == y[0] else "placed differently")
                )
                parts.append(f"{j} ({what})")
            return f"decision {k} at {ta:.1f} s: {len(diff)} jobs differ: " + ", ".join(parts)
    if len(a) != len(b):
        return f"decision {min(len(a), len(b))}: one replay has {len(a)} decisions, the other {len(b)}"
    return "none: every decision saw the same jobs at the same progress"


def _attribute(
    sc: Scenario, a: tuple[SimResult, Trace], b: tuple[SimResult, Trace], names: list[str], top: int
) -> None:
    """The jobs that make the gap: busy GPU-hours gained or lost, and the hours each ran as a fluid."""
    topo = sc.topology
    scale = topo.n_gpus * sc.horizon_s / 100.0  # GPU-seconds per utilisation point
    by_b = {j.id: j for j in b[0].jobs}
    pairs = sorted(((j, by_b[j.id]) for j in a[0].jobs), key=lambda p: p[1].busy_gpu_s - p[0].busy_gpu_s)

    def tors(j: JobResult) -> int:
        return len({topo.host_of(g).tors for g in j.placement})

    def line(x: JobResult, y: JobResult) -> str:
        return (
            f"    {x.id} {x.gpus:4d} GPUs: {(y.busy_gpu_s - x.busy_gpu_s) / scale:+.2f} points; ToRs "
            f"{tors(x)}/{tors(y)}, start {x.start_s or 0:.0f}/{y.start_s or 0:.0f} s, as a fluid "
            f"{a[1].fluid_s[x.id] / 3600:.1f}/{b[1].fluid_s[y.id] / 3600:.1f} h"
        )

    print(f"  largest losers and gainers ({names[0]}/{names[1]}):")
    for x, y in pairs[:top] + pairs[::-1][:top]:
        print(line(x, y))
    ever = {j for j in by_b if a[1].fluid_s[j] > 0 or b[1].fluid_s[j] > 0}
    moved = sum(y.busy_gpu_s - x.busy_gpu_s for x, y in pairs if x.id in ever) / scale
    print(f"  jobs run as a fluid in either replay: {len(ever)}, {moved:+.2f} points of the gap")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--policies", default="crux-ps-pa,crux-full", help="two policies, comma-separated")
    ap.add_argument(
        "--fluid-min-jobs", type=int, default=SimConfig(horizon_s=1.0).fluid_min_jobs, help="0: no fluid"
    )
    ap.add_argument("--routes-at-once", action="store_true", help="experiment: steps in flight move at once")
    ap.add_argument(
        "--dag-with-routes-in-flight",
        action="store_true",
        help="experiment: the compression's DAG also has the pairs sharing a link through a step in flight",
    )
    ap.add_argument("--hours", type=float, default=None, help="only jobs arriving in the first hours")
    ap.add_argument("--top", type=int, default=5, help="jobs listed among the largest losers and gainers")
    ap.add_argument("--jitter-s", type=float, default=0.0)
    ap.add_argument("--jitter-seed", type=int, default=1)
    args = ap.parse_args()
    sc = windowed_scenario(args.scenario, args.hours, args.jitter_s, args.jitter_seed)
    names = [p.strip() for p in args.policies.split(",")]
    if len(names) != 2:
        ap.error("--policies takes exactly two names")
    runs = []
    for name in names:
        c0 = time.process_time()
        res, trace = _replay(
            sc, name, args.fluid_min_jobs, args.routes_at_once, args.dag_with_routes_in_flight
        )
        runs.append((name, res, trace, time.process_time() - c0))
    (na, ra, ta, _), (nb, rb, tb, _) = runs
    same = [(x.id, x.start_s, x.busy_gpu_s, x.end_s) for x in ra.jobs] == [
        (x.id, x.start_s, x.busy_gpu_s, x.end_s) for x in rb.jobs
    ]
    jitter = f", jitter {args.jitter_s:g} s seed {args.jitter_seed}" if args.jitter_s > 0 else ""
    print(
        f"{sc.name} ({len(sc.jobs)} jobs, {sc.horizon_s / 3600:g} h{jitter}), fluid_min_jobs "
        f"{args.fluid_min_jobs}{', routes at once' if args.routes_at_once else ''}"
        f"{', DAG with the routes in flight' if args.dag_with_routes_in_flight else ''}: {na} "
        f"{ra.gpu_utilization:.4f}, {nb} {rb.gpu_utilization:.4f}, gap "
        f"{100 * (rb.gpu_utilization - ra.gpu_utilization):+.2f} points; identical job by job: {same}"
    )
    print(f"  first difference: {_first_difference(ta.digests, tb.digests)}")
    for name, res, trace, cpu in runs:
        fl = ", ".join(f"{k} {v}" for k, v in sorted(trace.fluid.items()))
        print(
            f"  {name}: {cpu:.0f} CPU-s, {sum(j.finished for j in res.jobs)} finished; "
            f"{sum(trace.fluid_s.values()) / 3600:.0f} job-hours as a fluid; {fl or 'no fluid'}"
        )
    if not same:
        _attribute(sc, runs[0][1:3], runs[1][1:3], names, args.top)


if __name__ == "__main__":
    main()
