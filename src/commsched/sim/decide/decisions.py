"""Applying decisions: ask the policy per contention domain on every arrival and departure, then install
routes and classes.

The running jobs fall into *domains* (:mod:`commsched.sim.decide.domains`): groups that can ever share a link.
A start or a departure changes its own domain only, so only that domain is decided afresh, and the
policy sees only its jobs (every policy decides per domain, :mod:`commsched.scheduling.domains`).
Decisions apply at once, routes included: a new class at once, new routes at once to the bytes a step
has not yet sent (Crux moves a live RoCE connection with ``ibv_modify_qp``; commsched's transport rebinds
on its next send: :meth:`commsched.sim.rates.pacing.Pacing.reroute`). A job whose connections cannot move
(``transport: persistent``, an unmodified program over TCP connections it opened once) keeps the routes
of its first decision, and the policy is told the links they hold (``ClusterState.in_flight_links``).
The jobs of a re-decided domain are partitioned into *components* (jobs joined through links that can
saturate: :mod:`commsched.sim.decide.partition`);
a component that the decision leaves untouched keeps its id and its fast-mode regime, one that it touches
is first caught up to the clock. Nothing outside the
re-decided domains is settled, re-partitioned or re-allocated: a decision costs what its domain holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from commsched.intrajob.tiein import effective_overlap
from commsched.scheduling.domains import job_reach, merge_decisions
from commsched.scheduling.intensity import intensity_from_traffic
from commsched.scheduling.interfaces import PolicyContext, PolicyFn
from commsched.scheduling.memo import Memo
from commsched.scheduling.paths import PathTable, job_flows
from commsched.scheduling.priority import JobFacts
from commsched.scheduling.routemap import RouteMap, by_job
from commsched.scheduling.state import ClusterState, Decisions, PlacedJob
from commsched.scheduling.traffic import JobTraffic, job_traffic
from commsched.sim.decide.domains import DomainIndex
from commsched.sim.decide.partition import Partition
from commsched.sim.jobs.hooks import Fluids, Regimes
from commsched.sim.jobs.iteration import delay_next, run_traffic
from commsched.sim.jobs.runs import JobRun
from commsched.sim.loop.kernel import EventKernel
from commsched.sim.rates.pacing import Pacing
from commsched.sim.results.ideal import reference_s
from commsched.topology import Topology
from commsched.workload import JobId

#: what a decision plans for one job: its run, class, routes key, new traffic (if any) and time shift
_Planned = tuple[JobRun, int, RouteMap, JobTraffic | None, float]


class DecisionApplier:
    """Owns what the policy sees between decisions (its memo and epoch), the domains, and each job's
    routes now.

    Parameters
    ----------
    topology, policy, priority_levels, seed
        The cluster, the communication policy, the hardware classes and the seed it is given.
    runs
        The jobs' run state.
    kernel, pacing
        The engine's parts a decision updates.
    fast, fluid
        The fast mode, through what a decision asks of it (:mod:`commsched.sim.jobs.hooks`).
    start
        Starts an iteration of a job at a time (:meth:`commsched.sim.jobs.iteration.Iterations.start`).
    """

    def __init__(  # noqa: PLR0913 -- the engine's parts a decision updates, wired once by Simulation
        self,
        *,
        topology: Topology,
        policy: PolicyFn,
        priority_levels: int,
        seed: int,
        runs: Sequence[JobRun],
        kernel: EventKernel,
        pacing: Pacing,
        fast: Regimes,
        fluid: Fluids,
        start: Callable[[JobRun, float], None],
    ) -> None:
        self._topology = topology
        self._policy = policy
        self._priority_levels = priority_levels
        self._seed = seed
        self._runs = runs
        self._kernel = kernel
        self._pacing = pacing
        self._fast = fast
        self._fluid = fluid
        self._start = start
        self._epoch = 0
        self._memo = Memo()  # pure per-job / per-pair results the policy reuses between decisions
        self._routes_cache: dict[int, RouteMap] = {}  # per job: its routes now
        #: per persistent job: the links its connections hold, with the traffic they were taken from
        self._flight: dict[int, tuple[JobTraffic, tuple[int, ...]]] = {}
        self.domains = DomainIndex()
        self._partition = Partition()  # components cut at the links that can saturate
        self._dirty: set[int] = set()  # domains to decide afresh
        self._gone: list[JobRun] = []  # jobs that left since the last decision
        self._order: dict[int, int] = {}  # per running job: its start sequence (the running order)
        self._starts = 0
        self._next_comp = 0
        #: the most jobs a component (jobs sharing links) has held (a diagnostic)
        self.largest_component = 0

    # ------------------------------------------------------------------ domains
    def joined(self, r: JobRun) -> None:
        """A job has started (placed): it joins, and perhaps merges, domains to be decided afresh."""
        assert r.placed is not None
        self._order[r.index] = self._starts
        self._starts += 1
        before = {d for d in self._dirty if d in self.domains.members}
        placed = r.placed
        table = self._memo.get("path-table", lambda: PathTable(self._topology))  # the policy's own
        flows = self._memo.get(("flows", placed.id), partial(job_flows, table, placed))
        d = self.domains.add(r.index, job_reach(table, placed, flows))
        self._dirty = {x for x in before if x in self.domains.members} | {d}

    def left(self, r: JobRun) -> None:
        """A job has finished: its domain's other jobs are decided afresh (the domain may split)."""
        dead = self.domains.domain_of(r.index)
        parts = self.domains.remove(r.index)
        self._dirty.discard(dead)
        self._dirty.update(parts)
        self._order.pop(r.index, None)
        self._routes_cache.pop(r.index, None)
        self._flight.pop(r.index, None)
        self._partition.forget(r.routed)
        self._memo.forget(r.spec.id)  # its values are never asked for again
        self._gone.append(r)
        c = r.component
        members = self._pacing.components.get(c)
        if members is not None and all(self._runs[i].finished for i in members):
            self._retire([c])
        if not self._dirty:
            self._release_gone()

    def _release_gone(self) -> None:
        """Drop the traffic of the jobs that left (once their components are gone): a long run keeps
        only the results of finished jobs, not their per-link schedules."""
        for r in self._gone:
            run_traffic(r, None)
            r.routed = None
        self._gone = []

    def decide(self) -> None:
        """Decide the domains that changed since the last decision, and apply the decisions."""
        if not self._dirty:
            return
        groups = sorted(
            (sorted(self.domains.members[d], key=self._order.__getitem__) for d in self._dirty),
            key=lambda g: self._order[g[0]],
        )
        self._dirty = set()
        jobs = sorted((i for g in groups for i in g), key=self._order.__getitem__)
        for i in jobs:
            self._pacing.settle(self._runs[i])
            if self._fluid.is_fluid(i):
                self._fluid.settle(i)
        parts = [self._decide_domain(g) for g in groups]
        self._apply(parts[0] if len(parts) == 1 else merge_decisions(parts), jobs)
        self._release_gone()

    def _decide_domain(self, idxs: list[int]) -> Decisions:
        runs = [self._runs[i] for i in idxs]
        state = ClusterState(
            topology=self._topology,
            jobs=tuple(p for r in runs if (p := r.placed) is not None),
            priority_levels=self._priority_levels,
            in_flight_links=self._in_flight_links(runs),
        )
        ctx = PolicyContext(seed=self._seed, now_s=self._kernel.now, epoch=self._epoch, memo=self._memo)
        self._epoch += 1
        return self._policy(state, ctx)

    def _in_flight_links(self, runs: Sequence[JobRun]) -> dict[JobId, tuple[int, ...]]:
        """Per persistent job, the links its connections hold (the routes of its first decision)."""
        out: dict[JobId, tuple[int, ...]] = {}
        for r in runs:
            tr = r.routed
            if tr is None or r.spec.transport != "persistent":
                continue
            hit = self._flight.get(r.index)
            if hit is None or hit[0] is not tr:
                hit = self._flight[r.index] = (tr, tuple(tr.link_ids.tolist()))
            if hit[1]:
                out[r.spec.id] = hit[1]
        return out

    # ------------------------------------------------------------------ applying
    def _apply(self, d: Decisions, jobs: list[int]) -> None:
        plan = self._plan(d, jobs)
        changed = {r.index for r, _, _, new_tr, shift in plan if self._moves(r, new_tr, shift)}
        reclassed = {r.index for r, cls, _, _, _ in plan if cls != r.priority_class}
        old = {c for i in jobs if (c := self._runs[i].component) in self._pacing.components}
        comps = self._partition.components(
            [
                (r.index, t if t is not None else r.routed, 1 if r.companion is None else 2)
                for r, _, _, t, _ in plan
            ],
            self._pacing.capacity_bytes_per_s,
        )
        keep = self._untouched(comps, old, changed, reclassed, {r.index: cls for r, cls, _, _, _ in plan})
        # first what the decision changes, with nothing changed yet: a component that a jump moved ahead
        # of the clock and that the decision touches is caught up first, under the regime it extrapolated
        for c in sorted(old):
            if c in self._fast.ahead and c not in keep.values():
                self._fast.catch_up(c)
        for r, cls, key, new_tr, shift in plan:
            self._install(r, cls, key, new_tr, shift)
        mine = self._rebuild_components(comps, keep, old)
        for comp in mine:
            if comp not in self._fast.ahead:  # a component ahead of the clock keeps its paces and events
                self._pacing.reallocate(comp)
        now = self._kernel.now
        for i in jobs:
            r = self._runs[i]
            fresh = r.start_s == now and r.iterations_done == 0 and not r.computing and not r.released
            if fresh and not self._fluid.is_fluid(i):
                self._start(r, now + r.time_shift_s)
        self._fluid.apply(mine, set(keep.values()))

    def _plan(self, d: Decisions, jobs: list[int]) -> list[_Planned]:
        routes = by_job(d.routes)  # per job: a policy that keeps a job's routes hands back the same map
        plan: list[_Planned] = []
        for i in jobs:
            r = self._runs[i]
            assert r.placed is not None
            key = routes.of(r.spec.id)
            new_tr = None
            fixed = r.routed is not None and r.spec.transport == "persistent"
            if r.routed is None or (not fixed and self._routes_cache.get(i) != key):
                new_tr = self._traffic(r.placed, key)
            shift = float(d.time_shift_s.get(r.spec.id, 0.0))
            plan.append((r, d.class_of(r.spec.id), key, new_tr, shift))
        return plan

    @staticmethod
    def _moves(r: JobRun, new_tr: JobTraffic | None, shift: float) -> bool:
        """Whether a decision changes a job's routes or phase."""
        phase = r.traffic is not None and shift != r.time_shift_s and r.standalone_s > 0
        return new_tr is not None or phase

    def _install(self, r: JobRun, cls: int, key: RouteMap, new_tr: JobTraffic | None, shift: float) -> None:
        r.priority_class = cls
        new_job = r.routed is None
        if new_tr is not None:
            self._routes_cache[r.index] = key
            if new_job:
                r.routed = new_tr
                run_traffic(r, new_tr)
                self._init_job(r)
            else:
                self._partition.forget(r.routed)
                r.routed = new_tr
                plan = self._pacing.stream_plan(r, new_tr) if r.companion is not None else None
                self._pacing.reroute(r, new_tr if plan is None else plan.traffic)
        if not new_job and shift != r.time_shift_s and r.standalone_s > 0:
            # CASSINI: a changed phase delays the next iteration start once by the difference
            delay_next(r, (shift - r.time_shift_s) % r.standalone_s)
        r.time_shift_s = shift

    def _traffic(self, placed: PlacedJob, routes: RouteMap) -> JobTraffic:
        """The job's traffic under its routes: the one the policy projected for its facts, if it did."""
        facts = self._memo.peek(("facts", placed.id, routes))
        if isinstance(facts, JobFacts) and facts.job is placed:
            return facts.traffic
        return job_traffic(self._topology, placed, routes)

    def _init_job(self, r: JobRun) -> None:
        """Standalone iteration time, intensity and iteration target of a newly started job."""
        assert r.traffic is not None
        p = r.spec.profile
        if r.companion is not None:
            self._init_grouped(r)
            return
        comm = 0.0
        for s in r.traffic.steps:
            pace = self._pacing.standalone_pace(s.links, s.share)
            comm += s.repeat * (s.latency_s + s.max_flow_bytes / pace)
        if r.iteration_model is not None:
            r.overlap = effective_overlap(p.compute_s, comm, r.iteration_model(comm))
        r.standalone_s = max(p.compute_s, r.overlap * p.compute_s + comm)
        assert r.placed is not None
        r.intensity = intensity_from_traffic(self._topology, r.placed, r.traffic).value
        if r.spec.iterations is not None:
            r.target_iterations = float(r.spec.iterations)
        elif r.spec.duration_s is not None:
            r.target_iterations = float(max(1, round(r.spec.duration_s / max(reference_s(r), 1e-12))))

    def _init_grouped(self, r: JobRun) -> None:
        """Standalone iteration time, intensity and target of a new grouped job: its two streams alone
        (:mod:`commsched.sim.jobs.streams`), ``max(B, o B + T_dp + W)``, ``B`` the compute and blocking
        stream."""
        assert r.traffic is not None and r.placed is not None
        plan = self._pacing.stream_plan(r, r.traffic)
        r.standalone_s = plan.alone_s(r.spec.profile.compute_s, r.overlap)
        r.intensity = intensity_from_traffic(self._topology, r.placed, r.traffic).value
        if r.spec.iterations is not None:
            r.target_iterations = float(r.spec.iterations)
        elif r.spec.duration_s is not None:
            r.target_iterations = float(max(1, round(r.spec.duration_s / max(reference_s(r), 1e-12))))

    def _untouched(
        self,
        comps: list[list[int]],
        old: set[int],
        changed: set[int],
        reclassed: set[int],
        classes: dict[int, int],
    ) -> dict[tuple[int, ...], int]:
        """The new components that a decision leaves as they were, with their current ids.

        Untouched: the same jobs as an existing component, none of whose routes or phase change and,
        for a component of several jobs, none of whose pairs sharing a link changes order under the
        new ``classes`` (the rates depend on that order only, not on the class numbers: unique classes
        shift by one under every job ranked above a newcomer). Its periodic regime goes on.
        """
        before = {tuple(self._pacing.components[c]): c for c in old}
        keep: dict[tuple[int, ...], int] = {}
        for idxs in comps:
            prev = before.get(tuple(idxs))
            if prev is None or changed.intersection(idxs):
                continue
            if len(idxs) > 1 and reclassed.intersection(idxs) and self._reordered(idxs, classes):
                continue
            keep[tuple(idxs)] = prev
        return keep

    def _reordered(self, idxs: list[int], classes: dict[int, int]) -> bool:
        """Whether the new ``classes`` change the order of two jobs of a component that share a link."""
        runs = [self._runs[i] for i in idxs]
        old = np.array([r.priority_class for r in runs])
        new = np.array([classes[i] for i in idxs])
        flip = np.sign(old[:, None] - old[None, :]) != np.sign(new[:, None] - new[None, :])
        for a, b in zip(*np.nonzero(np.triu(flip, 1)), strict=True):
            ta, tb = runs[int(a)].routed, runs[int(b)].routed
            if ta is not None and tb is not None and np.intersect1d(ta.link_ids, tb.link_ids).size:
                return True
        return False

    def _rebuild_components(
        self, comps: list[list[int]], keep: dict[tuple[int, ...], int], old: set[int]
    ) -> dict[int, list[int]]:
        """Install the decided jobs' components: those in ``keep`` keep their id and fast-mode history,
        the others get new ids; the components they replace are retired. Returns the installed ones."""
        kept = set(keep.values())
        self._retire(old - kept)
        mine: dict[int, list[int]] = {}
        fresh: dict[int, list[int]] = {}
        for idxs in comps:
            c = keep.get(tuple(idxs))
            if c is None:
                c = self._next_comp
                self._next_comp += 1
                fresh[c] = idxs
            mine[c] = idxs
            self._pacing.components[c] = idxs
            self.largest_component = max(self.largest_component, len(idxs))
            for i in idxs:
                self._runs[i].component = c
                if len(idxs) > 1:
                    self._runs[i].shared_links = True
        self._fast.expire(kept)
        self._fast.adopt(fresh)
        return mine

    def _retire(self, comps: set[int] | list[int]) -> None:
        for c in comps:
            self._pacing.components.pop(c, None)
        self._fast.forget(comps)
