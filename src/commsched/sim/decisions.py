"""Applying decisions: ask the policy on every arrival and departure, then install routes and classes.

New classes apply at once; new routes apply from the job's next communication release (a step in flight
keeps its links). The running jobs are partitioned into *components* (jobs connected through shared
links, current or next routes); a component that a decision leaves untouched keeps its fast-mode regime,
one that it touches is first caught up to the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from commsched.intrajob.tiein import effective_overlap
from commsched.scheduling.intensity import intensity_from_traffic
from commsched.scheduling.interfaces import PolicyContext, PolicyFn
from commsched.scheduling.memo import Memo
from commsched.scheduling.priority import JobFacts
from commsched.scheduling.state import ClusterState, ConnectionKey, Decisions, PlacedJob
from commsched.scheduling.traffic import JobTraffic, job_traffic
from commsched.sim.fast import FastMode
from commsched.sim.fluid import FluidMode
from commsched.sim.iteration import Iterations
from commsched.sim.kernel import EventKernel
from commsched.sim.pacing import Pacing
from commsched.sim.runs import JobRun
from commsched.topology import Topology
from commsched.workload import JobId


class DecisionApplier:
    """Owns what the policy sees between decisions (its memo and epoch) and each job's routes now.

    Parameters
    ----------
    topology, policy, priority_levels, seed
        The cluster, the communication policy, the hardware classes and the seed it is given.
    runs, running
        The jobs' run state and the indices of the running ones (owned by the job lifecycle).
    kernel, pacing, fast, fluid, iterations
        The engine's parts a decision updates.
    """

    def __init__(
        self,
        *,
        topology: Topology,
        policy: PolicyFn,
        priority_levels: int,
        seed: int,
        runs: Sequence[JobRun],
        running: Sequence[int],
        kernel: EventKernel,
        pacing: Pacing,
        fast: FastMode,
        fluid: FluidMode,
        iterations: Iterations,
    ) -> None:
        self._topology = topology
        self._policy = policy
        self._priority_levels = priority_levels
        self._seed = seed
        self._runs = runs
        self._running = running
        self._kernel = kernel
        self._pacing = pacing
        self._fast = fast
        self._fluid = fluid
        self._iterations = iterations
        self._epoch = 0
        self._memo = Memo()  # pure per-job / per-pair results the policy reuses between decisions
        self._routes_cache: dict[int, dict[tuple[str, str], int]] = {}  # per job: its routes now

    def decide(self) -> None:
        """Ask the policy for decisions on the running jobs and apply them."""
        self._pacing.settle_all(self._running)
        self._fluid.settle_all()
        state = ClusterState(
            topology=self._topology,
            jobs=tuple(p for i in self._running if (p := self._runs[i].placed) is not None),
            priority_levels=self._priority_levels,
            in_flight_links=self._in_flight_links(),
        )
        ctx = PolicyContext(seed=self._seed, now_s=self._kernel.now, epoch=self._epoch, memo=self._memo)
        self._epoch += 1
        decisions = self._policy(state, ctx)
        self._apply(decisions)

    def _in_flight_links(self) -> dict[JobId, tuple[int, ...]]:
        """Per running job, the links of its step in flight and of the routes in force now."""
        out: dict[JobId, tuple[int, ...]] = {}
        for i in self._running:
            r = self._runs[i]
            routes = [t.link_ids for t in (r.traffic, r.next_traffic) if t is not None]
            if routes:
                out[r.spec.id] = tuple(np.unique(np.concatenate(routes)).tolist())
        return out

    def _apply(self, d: Decisions) -> None:
        own: dict[str, dict[tuple[str, str], int]] = {}
        own_items: dict[str, list[tuple[ConnectionKey, int]]] = {}
        for k, v in d.routes.items():
            own.setdefault(k.job, {})[(k.src, k.dst)] = v
            own_items.setdefault(k.job, []).append((k, v))
        # first what the decision changes, with nothing changed yet: a component that a jump moved ahead
        # of the clock and that the decision touches is caught up first, under the regime it extrapolated
        changed: set[int] = set()  # jobs whose routes or phase this decision changes
        reclassed: set[int] = set()  # jobs whose class it changes (matters only beside other jobs)
        plan: list[tuple[JobRun, int, dict[tuple[str, str], int], JobTraffic | None, float]] = []
        no_routes: dict[tuple[str, str], int] = {}
        for i in self._running:
            r = self._runs[i]
            assert r.placed is not None
            cls = d.class_of(r.spec.id)
            if cls != r.priority_class:
                reclassed.add(i)
            key = own.get(r.spec.id, no_routes)
            new_tr = None
            if r.next_traffic is None or self._routes_cache.get(i) != key:
                new_tr = self._traffic(r.placed, d.routes, own_items.get(r.spec.id, []))
                changed.add(i)
            shift = float(d.time_shift_s.get(r.spec.id, 0.0))
            if r.traffic is not None and shift != r.time_shift_s and r.standalone_s > 0:
                changed.add(i)
            plan.append((r, cls, key, new_tr, shift))
        comps = self._partition(
            [
                (r.traffic if r.traffic is not None else t, t if t is not None else r.next_traffic)
                for r, _, _, t, _ in plan
            ]
        )
        keep = self._untouched(comps, changed, reclassed, {r.index: cls for r, cls, _, _, _ in plan})
        for c in list(self._fast.ahead):
            if tuple(self._pacing.components.get(c, ())) not in keep:
                self._fast.catch_up(c)
        for r, cls, key, new_tr, shift in plan:
            r.priority_class = cls
            if new_tr is not None:
                r.next_traffic = new_tr
                self._routes_cache[r.index] = key
            new_job = r.traffic is None
            if new_job:
                r.traffic = r.next_traffic
                self._init_job(r)
            if not new_job and shift != r.time_shift_s and r.standalone_s > 0:
                # CASSINI: a changed phase delays the next iteration start once by the difference
                r.pending_delay_s = (shift - r.time_shift_s) % r.standalone_s
            r.time_shift_s = shift
        self._rebuild_components(comps, keep)
        for comp in self._pacing.components:
            if comp not in self._fast.ahead:  # a component ahead of the clock keeps its paces and events
                self._pacing.reallocate(comp)
        now = self._kernel.now
        for i in list(self._running):
            r = self._runs[i]
            fresh = r.start_s == now and r.iterations_done == 0 and not r.computing and not r.released
            if fresh and not self._fluid.is_fluid(i):
                self._iterations.start(r, now + r.time_shift_s)
        kept = {c for c, idxs in self._pacing.components.items() if tuple(idxs) in keep}
        self._fluid.apply(self._pacing.components, kept)

    def _traffic(
        self, placed: PlacedJob, routes: Mapping[ConnectionKey, int], own: list[tuple[ConnectionKey, int]]
    ) -> JobTraffic:
        """The job's traffic under its routes: the one the policy projected for its facts, if it did."""
        facts = self._memo.peek(("facts", placed.id, frozenset(own)))
        if isinstance(facts, JobFacts) and facts.job is placed:
            return facts.traffic
        return job_traffic(self._topology, placed, routes)

    def _init_job(self, r: JobRun) -> None:
        """Standalone iteration time, intensity and iteration target of a newly started job."""
        assert r.traffic is not None
        p = r.spec.profile
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
            r.target_iterations = float(max(1, round(r.spec.duration_s / max(r.standalone_s, 1e-12))))

    def _partition(self, traffics: list[tuple[JobTraffic | None, JobTraffic | None]]) -> list[list[int]]:
        """Components of the running jobs (running order), given each one's current and next traffic."""
        running = self._running
        if not running:
            return []
        rows: list[NDArray[np.int64]] = []
        cols: list[NDArray[np.int64]] = []
        for k, (cur, nxt) in enumerate(traffics):
            for tr in (cur,) if nxt is cur else (cur, nxt):
                if tr is not None:
                    rows.append(np.full(tr.link_ids.size, k, dtype=np.int64))
                    cols.append(tr.link_ids)
        n_jobs, n_links = len(running), self._pacing.capacity_bytes_per_s.size
        r_all = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        c_all = np.concatenate(cols).astype(np.int64) + n_jobs if cols else np.zeros(0, np.int64)
        adj = sparse.csr_matrix(
            (np.ones(r_all.size, dtype=np.int8), (r_all, c_all)), shape=(n_jobs + n_links, n_jobs + n_links)
        )
        _, labels = connected_components(adj, directed=False)
        comps: dict[int, list[int]] = {}
        for k, i in enumerate(running):
            comps.setdefault(int(labels[k]), []).append(i)
        return list(comps.values())

    def _untouched(
        self, comps: list[list[int]], changed: set[int], reclassed: set[int], classes: dict[int, int]
    ) -> dict[tuple[int, ...], int]:
        """The new components that a decision leaves as they were, with their current ids.

        Untouched: the same jobs as an existing component, none of whose routes or phase change and,
        for a component of several jobs, none of whose pairs sharing a link changes order under the
        new ``classes`` (the rates depend on that order only, not on the class numbers: unique classes
        shift by one under every job ranked above a newcomer). Its periodic regime goes on.
        """
        old = {tuple(idxs): c for c, idxs in self._pacing.components.items()}
        keep: dict[tuple[int, ...], int] = {}
        for idxs in comps:
            prev = old.get(tuple(idxs))
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
            la, lb = (
                np.concatenate([t.link_ids for t in (r.traffic, r.next_traffic) if t is not None])
                for r in (runs[int(a)], runs[int(b)])
            )
            if np.intersect1d(la, lb).size:
                return True
        return False

    def _rebuild_components(self, comps: list[list[int]], keep: dict[tuple[int, ...], int]) -> None:
        """Install the new components; those in ``keep`` keep their fast-mode history and jump."""
        self._pacing.components = dict(enumerate(comps))
        self._fast.rebuild(self._pacing.components, keep)
        for c, idxs in self._pacing.components.items():
            for i in idxs:
                self._runs[i].component = c
                if len(idxs) > 1:
                    self._runs[i].shared_links = True
