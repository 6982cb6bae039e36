"""Fast mode: detect the steady state of a component and jump over it.

At each iteration start of a component's *anchor* job the component's :class:`Signature` is taken; when
it matches an earlier one (:mod:`commsched.sim.fast.steady`), the stretch between them is a period, and the
component is moved ``m`` periods forward at once (:meth:`FastMode.apply_jump`): the same state, counters
credited ``m`` times. A component whose phases never meet again (jobs with unrelated iteration times)
is instead *measured*: once every job's rate agrees over two consecutive windows of its detailed
simulation, the component's state is moved forward by a stretch of time and each job is credited the
iterations it completes at its measured rate (:func:`commsched.sim.fast.steady.measured_rates`); until then
it stays in detail, so the fast mode never extrapolates a regime it has not seen hold. Each such stretch
is at most as long as the detail it was measured over and is checked by the detail after it
(:mod:`commsched.sim.fast.measured`): a regime that did not last is re-credited and measured again over
longer windows. The component is then *ahead* of the clock; a decision that touches it brings it back
(:meth:`FastMode.catch_up`) by taking back what is not yet due and, for a period, replaying the rest of
the current one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.traffic import JobTraffic
from commsched.sim.fast.jumps import Ahead, move, periodic_credit, shifted
from commsched.sim.fast.measured import MeasuredRegimes
from commsched.sim.fast.steady import History, Signature, best_match, best_relative_match, remember
from commsched.sim.jobs.runs import JobRun
from commsched.sim.loop.kernel import EventKernel
from commsched.sim.rates import flowkernel as fk
from commsched.sim.rates import flowlayout as fl
from commsched.sim.rates.pacing import Pacing
from commsched.sim.results.accounting import Jump, Ledger
from commsched.sim.results.records import SimConfig, SimResult


class FastMode:
    """Owns the fast mode's state: per component its anchor, signature history and jump ahead.

    Parameters
    ----------
    config
        Horizon and the fast mode's tolerances.
    runs, kernel, ledger, pacing
        The engine's parts it moves forward.
    replay
        The engine's event loop, run until a time (a catch-up replays a component's events with it).
    """

    def __init__(
        self,
        *,
        config: SimConfig,
        runs: Sequence[JobRun],
        kernel: EventKernel,
        ledger: Ledger,
        pacing: Pacing,
        replay: Callable[[float], float],
    ) -> None:
        self._config = config
        self._runs = runs
        self._kernel = kernel
        self._ledger = ledger
        self._pacing = pacing
        self._replay = replay
        #: per component: the signatures taken at its anchor's iteration starts
        self._history: dict[int, History] = {}
        #: per component: the traffic objects its signature links were computed from, and the links
        self._sig_links: dict[int, tuple[tuple[JobTraffic | None, ...], NDArray[np.int64]]] = {}
        #: per component: the job at whose iteration starts signatures are taken
        self._anchor: dict[int, int] = {}
        #: per component that has jumped ahead of the clock: the stretch it extrapolated
        self.ahead: dict[int, Ahead] = {}
        self._replaying = False  # catching a component up to the clock: no jumps
        #: catch-ups of components that were ahead of the clock (a diagnostic)
        self.catch_ups = 0
        #: the regimes extrapolated at measured rates, and their checks
        self._regimes = MeasuredRegimes(
            config=config,
            kernel=kernel,
            ledger=ledger,
            pacing=pacing,
            ahead=self.ahead,
            history=self._history,
        )
        #: what was extrapolated and what the checks saw
        self.log = self._regimes.log

    def report(self, result: SimResult) -> SimResult:
        """``result`` with what the fast mode extrapolated and what its checks saw."""
        job_s = sum(j.run_s for j in result.jobs if math.isfinite(j.run_s))
        log = self.log
        share = log.extrapolated_job_s / job_s if job_s > 0 else 0.0
        return replace(
            result,
            extrapolated_job_fraction=min(1.0, max(0.0, share)),
            fast_checks=log.checks,
            fast_checks_failed=log.failed,
            worst_check_disagreement=log.worst,
        )

    # ------------------------------------------------------------------ components
    def forget(self, comps: Iterable[int]) -> None:
        """Components that no longer exist: drop their history, jump and anchor."""
        for c in comps:
            self._history.pop(c, None)
            self._sig_links.pop(c, None)
            self.ahead.pop(c, None)
            self._anchor.pop(c, None)
            self._regimes.forget(c)

    def expire(self, comps: Iterable[int]) -> None:
        """Forget the jumps of these components that the clock has passed (their regime was replayed)."""
        now = self._kernel.now
        for c in comps:
            a = self.ahead.get(c)
            if a is not None and a.t_end <= now:
                del self.ahead[c]

    def adopt(self, comps: Mapping[int, list[int]]) -> None:
        """New components (ids not seen before): each starts with no history, anchored at its slowest job.

        A component that a decision leaves as it was keeps its id, and with it its history, jump and
        anchor; it is neither forgotten nor adopted.
        """
        for c, idxs in comps.items():
            self._anchor[c] = self._pick_anchor(idxs)

    def _pick_anchor(self, idxs: list[int]) -> int:
        """The slowest job (at standalone speed) of the highest class present: no other class starves
        it, so its iteration starts keep coming however crowded the component."""
        top = min(self._runs[i].priority_class for i in idxs)
        return max(
            (i for i in idxs if self._runs[i].priority_class == top),
            key=lambda i: (self._runs[i].standalone_s, -i),
        )

    def on_iteration_start(self, r: JobRun, t: float) -> None:
        """An iteration of ``r`` starts at ``t``: at the anchor's starts, look for a period."""
        if not self._replaying and self._anchor.get(r.component) == r.index and self._kernel.now == t:
            self._maybe_jump(r.component)

    # ------------------------------------------------------------------ jumps
    def _signature(self, comp: int) -> tuple[Signature, NDArray[np.int64], NDArray[np.float64]]:
        """The component's signature now, its links, and its per-job fields in the order of
        :class:`History`'s stacks (phase, step, done, start: one row each)."""
        runs = [self._runs[i] for i in self._pacing.components[comp]]
        now = self._kernel.now
        pool, sf, lf, _ = self._pacing.arrays
        if any(r.companion is not None for r in runs):  # pragma: no cover - grouped jobs take no signature
            for r in runs:
                self._pacing.settle(r)
        else:  # Pacing.settle of each job with a step in flight, in the component's order, in one call
            live = [r.index for r in runs if r.active and r.traffic is not None]
            if live:
                fk.settle_flush(sf, pool.pf, lf, np.array(live, dtype=np.int64), now)
        traffics = tuple(r.traffic for r in runs)
        cached = self._sig_links.get(comp)
        if (
            cached is not None
            and len(cached[0]) == len(traffics)
            and all(a is b for a, b in zip(cached[0], traffics, strict=True))
        ):
            links = cached[1]
        else:
            links = np.unique(
                np.concatenate([t.link_ids for t in traffics if t is not None] or [np.zeros(0, np.int64)])
            ).astype(np.int64)
            if cached is not None and not np.array_equal(cached[1], links):
                self._history[comp] = History()  # a job's routes changed: its counters are of other links
            self._sig_links[comp] = (traffics, links)
        prog = sf[:, fl.PROG]
        # per job: phase, step (+ progress; -1 before release, -2 once done), done, start, busy, last end
        fields = (
            np.array(
                [
                    (
                        (now - r.iteration_start_s) / max(r.standalone_s, 1e-12),
                        (r.step + prog[r.index]) if r.active else (-1.0 if not r.released else -2.0),
                        r.iterations_done,
                        r.iteration_start_s,
                        r.busy_gpu_s,
                        r.last_end_s,
                    )
                    for r in runs
                ],
                dtype=np.float64,
            )
            .reshape(len(runs), 6)
            .T.copy()
        )
        sig = Signature(
            t=now,
            phase=fields[0],
            step=fields[1],
            done=fields[2],
            start=fields[3],
            busy=fields[4],
            last_end=fields[5],
            link_bytes=self._ledger.link_bytes[links],  # fancy indexing: copies
            link_iw_bytes=self._ledger.link_iw_bytes[links],
        )
        return sig, links, fields[:4]

    def _maybe_jump(self, comp: int) -> None:
        """At an anchor iteration start: look for a period or a measured regime and jump over it."""
        runs = [self._runs[i] for i in self._pacing.components[comp]]
        partner = self._pacing.components.partner
        if partner and any(r.index in partner for r in runs):
            return  # a grouped job's two streams: simulated in detail (no signature of its overlapped stream)
        sig, links, rows = self._signature(comp)
        hist = self._history.get(comp)
        if hist is None:
            hist = self._history[comp] = History()
        hist.seed_now(sig, rows)
        if self._regimes.check(comp, runs, hist, sig, links):
            return
        cfg = self._config
        idx, dist = best_match(hist, sig)
        if idx < 0 or dist > cfg.fast_tolerance:
            # no exact period: an approximate one that misstates no job's throughput by more than
            # fast_rel_tolerance, else the jobs' measured rates (quasi-periodic groups never meet exactly)
            idx, rel = best_relative_match(hist, sig)
            if idx < 0 or rel > cfg.fast_rel_tolerance:
                self._regimes.measure(comp, runs, hist, sig, links)
                return
        then = hist[idx]
        m = self._jump_count(runs, sig.t - then.t, sig.done - then.done)
        if m < 1:
            self._remember(hist, sig)
            return
        jump = self.apply_jump(runs, links, then, sig, m)
        self.log.extrapolated_job_s += m * (sig.t - then.t) * len(runs)
        self.ahead[comp] = Ahead(
            t0=self._kernel.now, period=sig.t - then.t, m=m, then=then, now=sig, links=links, jump=jump
        )
        # the regime goes on: keep the matched stretch of history, moved forward, for the next jump
        shift = m * (sig.t - then.t)
        self._history[comp] = History(shifted(hist[i], then, sig, m, shift) for i in range(idx, len(hist)))

    def _remember(self, hist: History, sig: Signature) -> None:
        remember(hist, sig, keep=self._config.fast_max_history)

    def _jump_count(self, runs: list[JobRun], period: float, d_done: NDArray[np.float64]) -> int:
        """How many periods the component may repeat: up to the horizon, and short of its own departures.

        Events outside the component (arrivals, other departures) do not bound the jump: a decision that
        touches the component catches it up to the clock first (:meth:`catch_up`), and one that does not
        leaves its regime as it was.
        """
        m = math.floor((self._config.horizon_s - self._kernel.now) / period) - 1
        for r, dn in zip(runs, d_done.tolist(), strict=True):
            if r.target_iterations is not None and dn > 0:
                # one period of margin: catching up replays less than a period, which must not finish a job
                m = min(m, math.floor((r.target_iterations - r.iterations_done - 1.0) / dn) - 2)
        return m

    def catch_up(self, comp: int) -> None:
        """Bring a component that a jump moved ahead of the clock back to ``now``.

        A periodic jump repeated ``m`` periods from ``t0``; ``k`` of them have elapsed by now. The
        ``m - k`` periods not yet due are taken back (counters, times and the sampler's record), and the
        part of the current period up to now is simulated, events of this component only (no other job
        shares its links, so nothing else can interleave). A jump at measured rates is shortened to end
        now: each job keeps the iterations its rate gives it up to now.
        """
        kernel = self._kernel
        a = self.ahead.pop(comp, None)
        if a is None or kernel.now >= a.t_end:
            return
        self.catch_ups += 1
        t_now = kernel.now
        runs = [self._runs[i] for i in self._pacing.components[comp]]
        n_jobs = len(runs)
        if a.rates is not None and a.credited is not None:
            self._regimes.caught_up(comp, a, runs, t_now)
            return
        k = min(a.m, max(0, math.floor((t_now - a.t0) / a.period)))
        self.log.extrapolated_job_s -= (a.m - k) * a.period * n_jobs
        with kernel.aside(back=t_now):
            kernel.move_to(a.t_end)
            self.apply_jump(runs, a.links, a.then, a.now, k - a.m, record=False)
            if a.jump is not None:
                self._ledger.sampler.truncate_jump(a.jump, a.t0 + k * a.period)
            kernel.move_to(a.t0 + k * a.period)
            self._replaying = True
            try:
                self._replay(t_now)  # the engine's event loop, on this component's events alone
            finally:
                self._replaying = False
        for r in runs:
            self._pacing.settle(r)

    def apply_jump(
        self,
        runs: list[JobRun],
        links: NDArray[np.int64],
        then: Signature,
        now: Signature,
        m: int,
        *,
        record: bool = True,
    ) -> Jump | None:
        """Move the component ``m`` periods forward: same state, counters credited ``m`` times.

        ``m`` may be negative (periods taken back by :meth:`catch_up`; the caller corrects the sampler).
        Returns the sampler's record of the stretch when ``record``.
        """
        return move(
            self._kernel,
            self._ledger,
            self._pacing,
            runs,
            periodic_credit(runs, links, then, now, m),
            record=record,
        )
