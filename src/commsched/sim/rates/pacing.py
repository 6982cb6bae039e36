"""Rate allocation in the engine: the paces of the steps in flight, component by component.

Jobs that share links form a *component* (see :mod:`commsched.sim.decide.decisions`). The steps in flight are
held on arrays (:mod:`commsched.sim.rates.flowkernel`: one slot per step in flight, its links a range of a
pool of every transfer schedule's steps), and the work an event does follows what it changes:

* a step that starts or ends re-solves its component only on a configuration (steps in flight and their
  classes) not met before, else takes the paces kept for it (checked slot by slot); only the steps
  whose pace changes are settled and rescheduled;
* a step's bytes reach the link counters once per step, or when someone reads them
  (:meth:`Pacing.settle`: samples, jumps, decisions, the end of the run); progress is a few flops per
  change of the component, in the compiled kernel;
* each component keeps one pending end event, its earliest step end; the others are on the arrays.

A decision (new classes, new components) re-solves its components in full (:meth:`Pacing.reallocate`).
The fast mode moves a job's step in time through :meth:`reschedule_step` (and on, through :meth:`advance`).

A step's progress and pace live on the arrays only (its slot: :meth:`Pacing.progress`), not on its job.

Units: the topology gives capacities in bits/s; this module works in **bytes/s** only
(``capacity_bytes_per_s``), as do the traffic's transfer sizes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.traffic import JobTraffic
from commsched.sim.jobs.hooks import Events
from commsched.sim.jobs.iteration import run_traffic
from commsched.sim.jobs.runs import EventKind, JobRun
from commsched.sim.jobs.streams import DP_SUBCLASS, StreamPlan, stream_plan
from commsched.sim.rates import flowkernel as fk
from commsched.sim.rates import flowlayout as fl
from commsched.sim.rates.binding import Binding, SlotTraffic
from commsched.sim.rates.components import Components
from commsched.sim.rates.trafficpool import TrafficPool
from commsched.sim.results.accounting import Ledger

#: configurations whose paces are kept before the cache is cleared
_PACE_CACHE_MAX = 200_000
_NOW, _SLOT, _NEWROW, _HIT, _OUT_END, _OUT_SLOT = fl.NOW, fl.SLOT, fl.NEWROW, fl.HIT, fl.OUT_END, fl.OUT_SLOT
_STEP_END = EventKind.STEP_END


class Pacing:
    """Owns the components of contending jobs, the link capacities in bytes/s and the steps in flight.

    Parameters
    ----------
    link_bits_per_s
        Link capacities in bits/s (the topology's unit); kept as ``capacity_bytes_per_s`` in bytes/s.
    runs, kernel, ledger
        The jobs' run state (then the overlapped streams of the grouped jobs, one slot each, by index:
        :func:`commsched.sim.jobs.runs.companion_of`), the event kernel and the counters it updates (the
        ledger's per-link counters become rows of the link arrays the compiled kernel updates).
    network_links
        The network links (NIC and switch links), for the grouped jobs' streams alone
        (:func:`commsched.sim.jobs.streams.stream_plan`).
    """

    def __init__(
        self,
        *,
        link_bits_per_s: NDArray[np.float64],
        runs: Sequence[JobRun],
        kernel: Events,
        ledger: Ledger,
        network_links: NDArray[np.int64] | None = None,
    ) -> None:
        self._runs = runs
        self._network = network_links
        self._kernel = kernel
        self._ledger = ledger
        self.capacity_bytes_per_s: NDArray[np.float64] = link_bits_per_s / 8.0  # bits/s -> bytes/s
        # per link, its fields side by side (one cache line): capacity, the counters, scratch
        self._lf = np.zeros((link_bits_per_s.size, fl.LINK_ROWS))
        self._lf[:, fl.CAP] = self.capacity_bytes_per_s
        self._lf[:, fl.BYTES] = ledger.link_bytes
        self._lf[:, fl.IW_BYTES] = ledger.link_iw_bytes
        ledger.link_bytes = self._lf[:, fl.BYTES]  # views: the kernel adds to the ledger's counters
        ledger.link_iw_bytes = self._lf[:, fl.IW_BYTES]
        #: one slot per job (its index): the step it has in flight
        self._sf = np.zeros((max(len(runs), 1), fl.SLOT_FIELDS))
        self._sf[:, fl.END] = math.inf
        self._pool = TrafficPool()
        self._io = np.zeros(fl.IO_SIZE)
        self._snap = np.zeros((fl.SNAP_ROWS, self._sf.shape[0]))
        #: per slot: the hash of (slot, step row, class) while it is active, else 0; a component's
        #: configuration hash is the XOR of its slots' (kept up to date step by step)
        self._key = [0] * self._sf.shape[0]
        #: configuration hash -> its paces (a snapshot: slot, step row, class, pace per active slot)
        self._paces: dict[int, NDArray[np.float64]] = {}
        #: which entries each component's solves read; component id -> its jobs (in the running order)
        self.binding = Binding(n_links=link_bits_per_s.size)
        self.components = Components({r.parent.index: r.index for r in runs if r.parent}, self.binding.forget)
        #: grouped jobs' stream plans, by traffic id (the traffic kept beside: its id stays unique)
        self._plans: dict[int, tuple[JobTraffic, StreamPlan]] = {}
        #: component id -> (job, step version, time) of its pending step end
        self._pending: dict[int, tuple[int, int, float]] = {}

    # ------------------------------------------------------------------ the compiled loop's view
    @property
    def arrays(self) -> tuple[TrafficPool, NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """The pool, the slots, the links and the control vector (:mod:`commsched.sim.loop.compiled`)."""
        return self._pool, self._sf, self._lf, self._io

    def pending_end(self, comp: int) -> tuple[int, int, float] | None:
        """``comp``'s pending step end (job, step version, time), if any."""
        return self._pending.get(comp)

    def took_back(self, comp: int, pending: tuple[int, int, float] | None, versions: Sequence[int]) -> None:
        """``comp``'s slots were moved on the arrays: its pending end is ``pending``, its jobs' step versions
        ``versions`` (in its order), its keys anew."""
        for i, v in zip(self.components[comp], versions, strict=True):
            self._runs[i].step_version = v
        self._pending.pop(comp, None)
        if pending is not None:
            self._pending[comp] = pending
        for i in self.components.slots(comp).tolist():
            self._rekey(i)
        self.components.hashes.pop(comp, None)

    def standalone_pace(self, links: NDArray[np.int64], share: NDArray[np.float64]) -> float:
        """Pace (bytes/s) of a step alone on the fabric: the one its tightest link allows."""
        return float(np.min(self.capacity_bytes_per_s[links] / share))

    def stream_plan(self, r: JobRun, traffic: JobTraffic) -> StreamPlan:
        """The streams of grouped job ``r``'s ``traffic``: its steps in stream order (``plan.traffic``, the
        blocking TP and EP steps stretched in the pool)."""
        hit = self._plans.get(id(traffic))
        if hit is None or hit[0] is not traffic:
            assert r.spec.parallel is not None
            plan = stream_plan(traffic, self.capacity_bytes_per_s, r.spec.parallel.parallel, self._network)
            hit = self._plans[id(traffic)] = (traffic, plan)
            self._pool.stretch[id(plan.traffic)] = plan.stretch
        return hit[1]

    # ------------------------------------------------------------------ reading
    def settle(self, r: JobRun) -> None:
        """Advance an active step's progress and byte counters to ``now`` at its current pace."""
        now = self._kernel.now
        if not r.active or r.traffic is None:
            if r.companion is not None:
                self.settle(r.companion)
            return
        sf, s = self._sf, r.index
        fk.settle(sf, self._pool.pf, s, now)
        fk.flush(sf, self._pool.pf, self._lf, s)
        if r.companion is not None:
            self.settle(r.companion)

    def settle_all(self, running: Sequence[int]) -> None:
        for i in running:
            self.settle(self._runs[i])

    def progress(self, r: JobRun) -> float:
        """Fraction of ``r``'s step in flight done, in ``[0, 1]``, as of its last settling (its slot's)."""
        return float(self._sf[r.index, fl.PROG])

    def progress_rate(self, r: JobRun) -> float:
        """Fraction of the step in flight done per second at its pace (as of its last settling)."""
        return float(fk.progress_rate(self._sf, self._pool.pf, r.index))

    # ------------------------------------------------------------------ the steps of a job
    def begin(self, r: JobRun) -> None:
        """``r`` starts step ``r.step`` of ``r.traffic`` now: re-solve what it can change."""
        assert r.traffic is not None
        sf, s = self._sf, r.index
        sf[s, fl.CLS] = r.priority_class if r.parent is None else r.priority_class + DP_SUBCLASS
        sf[s, fl.INTENS] = r.intensity
        self._change(r, self._pool.row(r.traffic, r.step, self._compact))

    def end_step(self, r: JobRun) -> int:
        """``r``'s step in flight ends now: settle it and start its next step; returns that step (-1: its
        communication is done), which the iteration cycle records."""
        tr = r.traffic
        assert tr is not None
        pend = self._pending.get(r.component)
        if pend is not None and pend[0] == r.index:
            del self._pending[r.component]
        nxt = r.step + 1
        stop = len(tr.steps) if r.stop_step < 0 else r.stop_step
        row = self._pool.row(tr, nxt, self._compact) if nxt < stop else -1
        self._change(r, row)
        return nxt if row >= 0 else -1

    @staticmethod
    def forget_step(r: JobRun) -> None:
        """Make ``r``'s pending step end stale (it leaves the detail: a fluid)."""
        r.step_version += 1

    def drop(self, r: JobRun) -> None:
        """Forget ``r``'s slot without re-solving (a job leaving the fluid starts a new iteration)."""
        if self._key[r.index]:
            self._key[r.index] = 0
            self.components.hashes.pop(r.component, None)
        self._sf[r.index, fl.ACTIVE] = 0.0
        self._sf[r.index, fl.END] = math.inf

    def _change(self, r: JobRun, row: int) -> None:
        io, s, comp = self._io, r.index, r.component  # every step start and end: names bound once
        comps, keys, pool, hashes = self.components, self._key, self._pool, self.components.hashes
        h = hashes.get(comp)
        if h is None:
            h = self._config_hash(comp)
        key = hash((s, row, r.priority_class)) if row >= 0 else 0
        h ^= keys[s] ^ key
        keys[s] = key
        hashes[comp] = h
        io[_NOW] = self._kernel.now
        io[_SLOT] = s
        io[_NEWROW] = row
        known = self._paces.get(h)
        slots = comps.arrays.get(comp)
        if slots is None:
            slots = comps.slots(comp)
        if known is not None:
            io[_HIT] = 1.0
            fk.step_change(self._sf, pool.pf, pool.bf, self._lf, slots, io, known)
        if known is None or io[_HIT] < 0.0:  # not known, or (a hash collision) not this one
            self._bind(comp, r.traffic if row >= 0 else None)
            io[_HIT] = 0.0
            fk.step_change(self._sf, pool.pf, pool.bf, self._lf, slots, io, self._snap)
            if len(self._paces) >= _PACE_CACHE_MAX:
                self._paces.clear()
            self._paces[h] = self._snap[:, : int(io[fl.OUT_COUNT])].copy()
        self._schedule(comp, force=False)

    def _bind(self, comp: int, traffic: JobTraffic | None) -> None:
        """Make the entries ``comp``'s solve reads current (:mod:`commsched.sim.rates.binding`); ``traffic``:
        the
        schedule of the step about to start."""
        binding = self.binding
        if not binding.is_bound(comp):
            slots: list[SlotTraffic] = []
            for i in self.components.get(comp, ()):
                r = self._runs[i]
                slots.append((r.traffic, r.routed, 1 if r.companion is None else 2))
            binding.bind_component(comp, self._pool, self._lf, slots)
        elif traffic is not None:
            binding.ensure(comp, traffic, self._pool, self._lf)

    def _config_hash(self, comp: int) -> int:
        h = 0
        for i in self.components.get(comp, ()):
            h ^= self._key[i]
        partner = self.components.partner
        if partner:
            for i in self.components.get(comp, ()):
                if i in partner:
                    h ^= self._key[partner[i]]
        return h

    def _rekey(self, i: int) -> None:
        """Recompute slot ``i``'s key from the arrays (after its class or step row was set anew)."""
        sf = self._sf
        active = sf[i, fl.ACTIVE] != 0.0
        self._key[i] = hash((i, int(sf[i, fl.ROW]), int(sf[i, fl.CLS]))) if active else 0

    # ------------------------------------------------------------------ decisions and jumps
    def reallocate(self, comp: int) -> None:
        """Re-solve a component in full (after a decision) and reschedule its earliest step end."""
        slots = self.components.slots(comp)
        if slots.size == 0:
            return
        sf, now = self._sf, self._kernel.now
        fk.settle_many(sf, self._pool.pf, self._lf, slots, now)
        for i in self.components[comp]:
            r = self._runs[i]
            sf[i, fl.CLS] = r.priority_class
            sf[i, fl.INTENS] = r.intensity
            self._rekey(i)
            r.step_version += 1  # an end pending for it (under its former component) is stale
            if r.companion is not None:
                c = r.companion
                sf[c.index, fl.CLS] = c.priority_class + DP_SUBCLASS
                sf[c.index, fl.INTENS] = c.intensity
                self._rekey(c.index)
                c.step_version += 1
        self.components.hashes.pop(comp, None)
        io = self._io
        io[fl.NOW] = now
        self._bind(comp, None)
        fk.resolve(sf, self._pool.pf, self._pool.bf, self._lf, slots, io)
        self._schedule(comp, force=True)

    def reschedule_step(self, r: JobRun, settled_s: float | None = None) -> None:
        """``r``'s step was moved (:meth:`advance`; a jump: its slot now settled up to ``settled_s``):
        reschedule its end."""
        sf, s = self._sf, r.index
        if settled_s is not None:
            sf[s, fl.SETTLED] = settled_s
        sf[s, fl.CLS] = r.priority_class if r.parent is None else r.priority_class + DP_SUBCLASS
        sf[s, fl.INTENS] = r.intensity
        self._rekey(s)
        self.components.hashes.pop(r.component, None)
        fk.schedule_end(sf, self._pool.pf, s, self._io)
        fk.earliest(sf, self.components.slots(r.component), self._io)
        r.step_version += 1  # its own pending end, if it had one, is now stale
        self._schedule(r.component, force=True)

    def reroute(self, r: JobRun, traffic: JobTraffic) -> None:
        """``r`` runs ``traffic`` from now on (new routes, the same steps): a step in flight goes on from
        its progress on the same step of ``traffic`` (the bytes it sent stay on the links they crossed).

        A grouped job's ``traffic`` is its stream plan's, and both its streams move. The caller re-solves
        the job's component (:meth:`reallocate`), which sets the moved steps' paces and ends."""
        streams = [r] if r.companion is None else [r, r.companion]
        sf, now = self._sf, self._kernel.now
        moving = []
        for x in streams:
            if sf[x.index, fl.ACTIVE] != 0.0 and x.traffic is not None and x.step >= 0:
                fk.settle(sf, self._pool.pf, x.index, now)
                fk.flush(sf, self._pool.pf, self._lf, x.index)
                moving.append(x)
        for x in streams:
            if x is r or x.traffic is not None:
                run_traffic(x, traffic)
        for x in moving:
            s = x.index
            sf[s, fl.ROW] = self._pool.row(traffic, x.step, self._compact)
            sf[s, fl.FLUSHED] = sf[s, fl.PROG]
            sf[s, fl.PACE] = 0.0  # set anew by the re-solve, with its end
            sf[s, fl.END] = math.inf
            self._rekey(s)
        self.components.hashes.pop(r.component, None)

    def advance(self, r: JobRun, fraction: float) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Move ``r``'s step in flight ``fraction`` of its way on (back, if negative), within the step, and
        return its links and the bytes that moves on each (the fast mode credits a starved job's creep).

        The caller reschedules the step's end (:meth:`reschedule_step`); its pace is kept."""
        self.settle(r)
        sf, pf, s = self._sf, self._pool.pf, r.index
        row = int(sf[s, fl.ROW])
        new = min(max(float(sf[s, fl.PROG]) + fraction, 0.0), 1.0)
        moved = new - float(sf[s, fl.PROG])
        sf[s, fl.PROG] = sf[s, fl.FLUSHED] = new
        entries = slice(int(pf[row, fl.LO]), int(pf[row, fl.HI]))
        return pf[entries, fl.LINK].astype(np.int64), moved * pf[row, fl.REPEAT] * pf[entries, fl.BPR]

    def _schedule(self, comp: int, *, force: bool) -> None:
        """Keep one pending end event for ``comp``: the earliest end the kernel left in ``io``."""
        end, slot = float(self._io[_OUT_END]), int(self._io[_OUT_SLOT])
        pend = (pending := self._pending).get(comp)
        if pend is not None:
            job, version, t = pend
            old = self._runs[job]
            if old.step_version == version:
                if not force and job == slot and t == end:
                    return
                old.step_version += 1
            del pending[comp]
        if slot < 0 or end == math.inf:
            return
        version = self._runs[slot].step_version
        self._kernel.push(end, _STEP_END, slot, version)
        pending[comp] = (slot, version, end)

    def _compact(self) -> dict[int, int]:
        """The transfer schedules still in use (by a running job), for the pool to keep."""
        live: dict[int, JobTraffic] = {}
        for r in self._runs:
            if not r.finished:
                for t in (r.traffic, r.routed):
                    if t is not None:
                        live[id(t)] = t
        moved = self._pool.compact(live)
        self.binding.forget_all()
        self._plans = {k: v for k, v in self._plans.items() if k in live}
        for r in self._runs:
            if self._sf[r.index, fl.ACTIVE] != 0.0:
                if r.active and r.traffic is not None and id(r.traffic) in moved:
                    self._sf[r.index, fl.ROW] = moved[id(r.traffic)] + r.step
                else:
                    self.drop(r)
            self._rekey(r.index)
        self._paces.clear()  # keyed by step rows, which moved
        self.components.hashes.clear()
        return moved
