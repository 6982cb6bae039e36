"""Fast mode, large components: the fluid (analytic) steady state instead of step-by-step detail.

A component of many contending jobs with unrelated iteration times has no short period, and every
arrival or departure that touches it restarts the search for one; simulating it step by step costs
``O(members)`` per event and ``O(members x steps / iteration)`` events per second. In fast mode such a
component (``SimConfig.fluid_min_jobs`` jobs or more) is instead run at its *fluid average*:

* job ``j`` moves ``B_je`` bytes per iteration over link ``e`` (its steps' bytes, repeats included) and
  completes an iteration every ``T_j`` seconds, so it loads ``e`` on average with
  ``rho_je = B_je / (T_j C_e)`` of its capacity;
* while its step ``s`` is in flight, job ``j`` finds on each of the step's links the capacity that the
  jobs of higher classes and the other jobs of its class leave on average, ``1 - sum_k rho_ke``, and
  needs ``u_je`` of it at its standalone pace; the step runs at ``a_js = min(1, min_e (1 - sum_k rho_ke)
  / u_je)`` of that pace (strict priority: lower classes do not count);
* ``T_j = max(c_j, o_j c_j + sum_s R_s (alpha_s + s_s / (a_js p_s)))`` (compute ``c``, overlap ``o``,
  repeats ``R``, latency ``alpha``, largest transfer ``s``, standalone pace ``p``).

The ``T_j`` are a fixed point, solved by damped iteration once per change of the component's
membership, routes or classes; where it does not converge the component stays in detail. Each job then
progresses at ``1 / T_j`` iterations per second, continuously, and its counters (busy GPU-seconds, bytes
and intensity-weighted bytes per link) are credited at that rate whenever the engine settles it. A job
that joins keeps the part of its iteration already done; one whose component falls below the threshold
goes back to detail at the nearest whole iteration. The exact mode never uses this.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.traffic import JobTraffic
from commsched.sim.jobs.iteration import credit_busy, invalidate, pause, set_progress
from commsched.sim.jobs.runs import EventKind, JobRun
from commsched.sim.loop.kernel import EventKernel
from commsched.sim.results.accounting import Ledger

#: damped fixed-point iterations before a component is left in detail
_MAX_ROUNDS = 200
#: largest change of a job's rate under one more application (fraction of its standalone rate) at which
#: the fixed point is accepted
_CONVERGED = 1e-4
#: after ``_MAX_ROUNDS``: the damped iterate is taken if no rate still moves by more than this fraction
_ACCEPTED = 0.05


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class FluidLoad:
    """What the fluid model needs of one job's communication (one per traffic object)."""

    links: NDArray[np.int64]  # links it uses
    bytes_per_iter: NDArray[np.float64]  # per link of ``links``: bytes per iteration
    step_of: NDArray[np.int64]  # per (step, link) entry: the step
    entry_link: NDArray[np.int64]  # per entry: index into ``links``
    entry_use: NDArray[np.float64]  # per entry: capacity fraction the step uses at standalone pace
    latency_s: float  # sum of the steps' repeat x latency
    bw_time_s: NDArray[np.float64]  # per step: repeat x largest transfer / standalone pace


def fluid_load(traffic: JobTraffic, capacity_bytes_per_s: NDArray[np.float64]) -> FluidLoad:
    """The fluid model's view of a job's traffic on links of the given capacities (bytes/s)."""
    links = traffic.link_ids.astype(np.int64)
    pos = {int(e): k for k, e in enumerate(links.tolist())}
    per_iter = np.zeros(links.size)
    step_of, entry_link, entry_use, bw = [], [], [], []
    latency = 0.0
    for i, s in enumerate(traffic.steps):
        if s.links.size == 0:
            latency += s.repeat * s.latency_s
            bw.append(0.0)
            continue
        pace = float(np.min(capacity_bytes_per_s[s.links] / s.share))
        latency += s.repeat * s.latency_s
        bw.append(s.repeat * s.max_flow_bytes / pace)
        idx = np.array([pos[int(e)] for e in s.links.tolist()], dtype=np.int64)
        np.add.at(per_iter, idx, s.repeat * s.bytes_per_rep)
        step_of.append(np.full(idx.size, i, dtype=np.int64))
        entry_link.append(idx)
        entry_use.append(pace * s.share / capacity_bytes_per_s[s.links])
    cat = np.concatenate
    return FluidLoad(
        links=links,
        bytes_per_iter=per_iter,
        step_of=cat(step_of) if step_of else np.zeros(0, np.int64),
        entry_link=cat(entry_link) if entry_link else np.zeros(0, np.int64),
        entry_use=cat(entry_use) if entry_use else np.zeros(0),
        latency_s=latency,
        bw_time_s=np.array(bw),
    )


def fluid_periods(
    *,
    loads: Sequence[FluidLoad],
    compute_s: NDArray[np.float64],
    overlap: NDArray[np.float64],
    classes: NDArray[np.int64],
    capacity_bytes_per_s: NDArray[np.float64],
) -> NDArray[np.float64] | None:
    """The jobs' fluid iteration times ``T_j`` (see the module notes); ``None`` if it does not converge.

    Examples
    --------
    Two equal jobs of one class on one link (1 s compute, communication released at once, 1 s of
    transfer alone): each finds the other there half of the time, so both take 2 s per iteration, as
    they do step by step (their transfers always overlap and share the link).

    >>> from commsched.scheduling.traffic import JobTraffic, StepLoad
    >>> one = np.array([0]); cap = np.array([1.0])
    >>> st = StepLoad(links=one, bytes_per_rep=np.array([1.0]), max_flow_bytes=1.0, repeat=1,
    ...               latency_s=0.0, share=np.array([1.0]))
    >>> tr = JobTraffic(steps=(st,), link_ids=one, link_bytes=np.array([1.0]))
    >>> ld = fluid_load(tr, cap)
    >>> t = fluid_periods(loads=[ld, ld], compute_s=np.array([1.0, 1.0]), overlap=np.array([0.0, 0.0]),
    ...                   classes=np.array([0, 0]), capacity_bytes_per_s=cap)
    >>> [round(float(x), 3) for x in t]
    [2.0, 2.0]
    """
    n = len(loads)
    if n == 0:
        return np.zeros(0)
    pb = _pairs(loads, classes, capacity_bytes_per_s)
    latency = np.array([ld.latency_s for ld in loads])
    solo = np.maximum(compute_s, overlap * compute_s + latency + np.bincount(pb.sj, pb.bw, minlength=n))
    # iterate on the rates x = 1 / T (bounded by the standalone rates; a starved job tends to 0)
    x = 1.0 / solo
    a_step = np.ones(pb.bw.size)
    beta, last = 0.5, math.inf
    for _ in range(_MAX_ROUNDS):
        rho = pb.pv * x[pb.pj]
        # per (class level, link): the load of that level and the levels above it
        upto = np.cumsum(
            np.bincount(pb.bucket, rho, minlength=pb.n_levels * pb.n_links).reshape(pb.n_levels, pb.n_links),
            axis=0,
        ).ravel()
        # what a job finds on a link: that load without its own, and at least an equal part with the
        # jobs of its class of what the higher classes leave
        left = 1.0 - np.where(pb.e_above >= 0, upto[pb.e_above], 0.0)
        free = np.clip(np.maximum(1.0 - (upto[pb.e_bucket] - rho[pb.ep]), left / pb.e_peers), 1e-9, 1.0)
        a_step[pb.has] = np.minimum.reduceat(np.minimum(1.0, free / pb.eu), pb.starts)
        comm = latency + np.bincount(pb.sj, pb.bw / a_step, minlength=n)
        new = 1.0 / np.maximum(compute_s, overlap * compute_s + comm)
        residual = float(np.max(np.abs(new - x) * solo))  # in fractions of the standalone rate
        if residual <= _CONVERGED:
            out: NDArray[np.float64] = 1.0 / new
            return out
        if residual >= last:
            beta = max(beta * 0.5, 1.0 / 64)  # oscillating: smaller steps
        last = residual
        x = x + beta * (new - x)
    if last <= _ACCEPTED:  # a slow oscillation of small amplitude: its (damped) middle
        late: NDArray[np.float64] = 1.0 / x
        return late
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Pairs:
    """The index arrays of :func:`fluid_periods`: (job, link) pairs, (job, step, link) entries, steps."""

    n_links: int
    n_levels: int
    pj: NDArray[np.int64]  # per pair: its job
    pv: NDArray[np.float64]  # per pair: bytes per iteration over the capacity (rho per unit of 1/T)
    bucket: NDArray[np.int64]  # per pair: its (class level, link)
    ep: NDArray[np.int64]  # per entry: its pair
    eu: NDArray[np.float64]  # per entry: its use of the link at the standalone pace
    e_bucket: NDArray[np.int64]  # per entry: its (class level, link)
    e_above: NDArray[np.int64]  # per entry: the same link, the level above (-1: none)
    e_peers: NDArray[np.int64]  # per entry: the jobs of its class on its link
    bw: NDArray[np.float64]  # per step: its bandwidth time alone
    sj: NDArray[np.int64]  # per step: its job
    has: NDArray[np.bool_]  # per step: whether it has links
    starts: NDArray[np.int64]  # the first entry of every step that has links


def _pairs(
    loads: Sequence[FluidLoad], classes: NDArray[np.int64], capacity_bytes_per_s: NDArray[np.float64]
) -> _Pairs:
    links, inverse = np.unique(np.concatenate([ld.links for ld in loads]), return_inverse=True)
    n_links = links.size
    cap = capacity_bytes_per_s[links]
    levels, cls_idx = np.unique(classes, return_inverse=True)
    # the (job, link) pairs: rho per unit of 1/T, each job's bytes per iteration over the capacity
    pj = np.concatenate([np.full(ld.links.size, j, dtype=np.int64) for j, ld in enumerate(loads)])
    pc = inverse.astype(np.int64)
    pv = np.concatenate([ld.bytes_per_iter for ld in loads]) / cap[pc]
    bucket = cls_idx[pj] * n_links + pc  # (class level, link) of every pair
    # the (job, step, link) entries, grouped by step
    e_pair, e_use, e_step, s_bw, s_job = [], [], [], [], []
    n_steps = 0
    offset = 0  # the pairs of a job are contiguous, in the order of its links
    for j, ld in enumerate(loads):
        e_pair.append(offset + ld.entry_link)
        offset += ld.links.size
        e_use.append(np.maximum(ld.entry_use, 1e-12))
        e_step.append(ld.step_of + n_steps)
        s_bw.append(ld.bw_time_s)
        s_job.append(np.full(ld.bw_time_s.size, j, dtype=np.int64))
        n_steps += ld.bw_time_s.size
    ep, eu, es = (np.concatenate(x) for x in (e_pair, e_use, e_step))
    e_bucket = cls_idx[pj[ep]] * n_links + pc[ep]
    e_above = np.where(cls_idx[pj[ep]] > 0, e_bucket - n_links, -1)  # same link, the level above
    # jobs of the entry's class on its link: max-min within a class gives each at least an equal part
    e_peers = np.bincount(bucket, minlength=levels.size * n_links)[e_bucket]
    bw, sj = np.concatenate(s_bw), np.concatenate(s_job)
    has = np.zeros(bw.size, dtype=bool)
    has[es] = True
    starts = np.flatnonzero(np.diff(es, prepend=-1))  # first entry of every step that has links
    return _Pairs(
        n_links=n_links,
        n_levels=levels.size,
        pj=pj,
        pv=pv,
        bucket=bucket,
        ep=ep,
        eu=eu,
        e_bucket=e_bucket,
        e_above=e_above,
        e_peers=e_peers,
        bw=bw,
        sj=sj,
        has=has,
        starts=starts,
    )


class FluidMode:
    """Runs the large components of a fast-mode simulation at their fluid averages.

    Parameters
    ----------
    min_jobs
        Components of at least this many jobs are run as fluids (0: never).
    runs, kernel, ledger
        The engine's parts it moves forward.
    capacity_bytes_per_s
        Link capacities in bytes/s.
    start_detail
        Starts an iteration of a job in detail at a given time (a job leaving the fluid).
    forget_step
        Makes a job's pending step end stale (a job entering the fluid:
        :meth:`commsched.sim.rates.pacing.Pacing.forget_step`).
    """

    def __init__(
        self,
        *,
        min_jobs: int,
        runs: Sequence[JobRun],
        kernel: EventKernel,
        ledger: Ledger,
        capacity_bytes_per_s: NDArray[np.float64],
        start_detail: Callable[[JobRun, float], None],
        forget_step: Callable[[JobRun], None],
    ) -> None:
        self.min_jobs = min_jobs
        self._runs = runs
        self._kernel = kernel
        self._ledger = ledger
        self._cap = capacity_bytes_per_s
        self._start_detail = start_detail
        self._forget_step = forget_step
        #: per fluid job: (time settled to, progress in iterations, period T_j in seconds)
        self.state: dict[int, tuple[float, float, float]] = {}
        self._loads: dict[int, tuple[JobTraffic, FluidLoad]] = {}
        #: fluid solves done (a diagnostic)
        self.solves = 0

    def is_fluid(self, job: int) -> bool:
        return job in self.state

    def settle(self, job: int) -> None:
        """Credit a fluid job's progress and counters up to ``now``."""
        t0, prog, period = self.state[job]
        now = self._kernel.now
        if now <= t0:
            return
        r = self._runs[job]
        d = (now - t0) / period
        if r.target_iterations is not None:
            d = min(d, max(0.0, r.target_iterations - prog))
        self._credit(r, d)
        prog += d
        whole = math.floor(prog + 1e-9)
        if whole > r.iterations_done:
            set_progress(r, float(whole), last_end_s=t0 + (whole - (prog - d)) * period)
        self.state[job] = (now, prog, period)

    def settle_all(self) -> None:
        for job in self.state:
            self.settle(job)

    def _credit(self, r: JobRun, d: float) -> None:
        if d <= 0:
            return
        busy = d * r.gpu_count * r.spec.busy_s
        credit_busy(r, busy)
        self._ledger.busy_done_gpu_s += busy
        assert r.traffic is not None
        ld = self._load(r.traffic)
        moved = d * ld.bytes_per_iter
        self._ledger.link_bytes[ld.links] += moved
        self._ledger.link_iw_bytes[ld.links] += moved * r.intensity

    def _load(self, traffic: JobTraffic) -> FluidLoad:
        hit = self._loads.get(id(traffic))
        if hit is None or hit[0] is not traffic:
            hit = self._loads[id(traffic)] = (traffic, fluid_load(traffic, self._cap))
        return hit[1]

    def apply(self, comps: dict[int, list[int]], keep: set[int]) -> set[int]:
        """After a decision: run the large components as fluids, the others in detail.

        ``keep`` are the components the decision left as they were (their fluid regime goes on).
        Returns the components now run as fluids.
        """
        now = self._kernel.now
        fluid: set[int] = set()
        for c, idxs in comps.items():
            big = self.min_jobs > 0 and len(idxs) >= self.min_jobs
            if big and c in keep and all(i in self.state for i in idxs):
                fluid.add(c)
                continue
            if big and self._enter(idxs, now):
                fluid.add(c)
                continue
            for i in idxs:
                if i in self.state:
                    self._leave(self._runs[i], now)
        return fluid

    def _enter(self, idxs: list[int], now: float) -> bool:
        """Solve the component's fluid periods and run its jobs at them; False: leave it in detail."""
        runs = [self._runs[i] for i in idxs]
        if any(r.companion is not None for r in runs):
            return False  # a grouped job's two streams: run in detail
        traffics = [r.traffic for r in runs]
        loads = [self._load(tr) for tr in traffics if tr is not None]
        if len(loads) < len(runs):
            return False
        self.solves += 1
        periods = fluid_periods(
            loads=loads,
            compute_s=np.array([r.spec.profile.compute_s for r in runs]),
            overlap=np.array([r.overlap for r in runs]),
            classes=np.array([r.priority_class for r in runs], dtype=np.int64),
            capacity_bytes_per_s=self._cap,
        )
        if periods is None:
            return False
        for r, period in zip(runs, periods.tolist(), strict=True):
            prev = self.state.get(r.index)
            if prev is not None:
                prog = prev[1]
            else:
                # from detail: the part of the current iteration already done, its compute credited
                elapsed = max(0.0, now - r.iteration_start_s)
                if r.computing:
                    done = r.gpu_count * min(elapsed, r.spec.profile.compute_s)
                    if r.spec.parallel is not None:  # the bubble's share is not busy
                        done *= r.spec.busy_s / r.spec.profile.compute_s
                    credit_busy(r, done)
                    self._ledger.busy_done_gpu_s += done
                prog = r.iterations_done + min(elapsed / period, 0.999)
                pause(r)
                self._forget_step(r)
            invalidate(r)
            self.state[r.index] = (now, prog, period)
            if r.target_iterations is not None:
                t_end = now + max(0.0, r.target_iterations - prog) * period
                self._kernel.push(t_end, EventKind.COMPUTE_END, r.index, r.version)
        return True

    def _leave(self, r: JobRun, now: float) -> None:
        """Back to detail: the job starts a new iteration now, its progress rounded to whole iterations."""
        _, prog, _ = self.state.pop(r.index)
        set_progress(r, float(max(math.floor(prog + 0.5), math.floor(prog + 1e-9))))
        invalidate(r)
        if r.target_iterations is not None and r.iterations_done >= r.target_iterations - 1e-9:
            set_progress(r, r.target_iterations - 1.0)
        self._start_detail(r, now)

    def on_finish(self, r: JobRun) -> None:
        """A fluid job's last iteration ends now."""
        self.settle(r.index)
        del self.state[r.index]
        done = r.iterations_done if r.target_iterations is None else r.target_iterations
        set_progress(r, done, last_end_s=self._kernel.now)
