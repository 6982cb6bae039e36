"""Fast mode: regimes extrapolated at measured rates, each stretch bounded and checked by the detail after it.

A component without a period is *measured*: once every job's rate agrees over two consecutive windows
of its detailed simulation (:func:`commsched.sim.fast.steady.measured_rates`), it is moved forward by a
stretch at most as long as that detail, each job credited the iterations it completes at its measured
rate. A starved job that completes no iteration but *creeps* through one communication step at a rate
that agrees over both windows (the gaps the classes above it leave) is moved on through that step at
its rate, with the bytes that carries, and the stretch ends half a measurement before it would reach
the step's end (the detail sees it get there). A job that does not move at all keeps its component in
detail: a stalled job creeps through the rare gaps the classes above it leave, and crediting it nothing
would lose that. The detail after the stretch checks it (:mod:`commsched.sim.fast.checks`), creep included: a
regime that held may go on twice as far; one that did not is re-credited at the rates of all the
detail around the stretch (a creeping job moved through its step to where they put it) and measured
again over windows twice as long.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from commsched.sim.fast.checks import CheckLog, Pending, confirm
from commsched.sim.fast.jumps import Ahead, Credit, correct, measured_credit, move
from commsched.sim.fast.steady import History, Signature, measured_rates, remember
from commsched.sim.jobs.runs import JobRun
from commsched.sim.loop.kernel import EventKernel
from commsched.sim.rates.pacing import Pacing
from commsched.sim.results.accounting import Ledger
from commsched.sim.results.records import SimConfig

#: a creeping job is moved on only while its step's end lies at least this many measurements ahead: its
#: creep is then measured over a small part of the step, the detail that checks a stretch cannot see it
#: leave the step (a stretch that did not hold is corrected), and the stretches skip far more than
#: their checks cost; nearer, the detail gets it there (and may find a period of the whole component)
CREEP_WINDOWS = 16.0


def _creep_seen(
    p: Pending, first: Signature, now: Signature
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Per creeping job of ``p``: its creep over all the detail around the stretch (before: ``p.creep``
    over ``p.window_s``; after: from ``first`` to ``now``; NaN for the others), and whether it is still
    in its step (else it cannot be measured after the stretch)."""
    assert p.creep is not None
    crept = ~np.isnan(p.creep)
    stayed = (np.floor(now.step) == np.floor(first.step)) & (first.done == now.done)
    t = now.t - first.t
    after = (now.step - first.step) / max(t, 1e-300)
    both = (np.nan_to_num(p.creep) * p.window_s + after * t) / (p.window_s + t)
    return np.where(crept, both, np.nan), stayed | ~crept


def _creep_on(p: Pending, first: Signature, now: Signature) -> NDArray[np.float64] | None:
    """The creep of ``p``'s creeping jobs for the next stretch; ``None`` if one of them left its step."""
    if p.creep is None:
        return None
    both, stayed = _creep_seen(p, first, now)
    return both if stayed.all() else None


def _creep_fix(p: Pending, first: Signature, now: Signature) -> NDArray[np.float64] | None:
    """Per creeping job still in its step, how much faster (slower: negative) it should have been moved
    through the stretch: its creep over all the detail around it less the one it was moved at."""
    if p.creep is None:
        return None
    both, stayed = _creep_seen(p, first, now)
    return np.where(stayed, np.nan_to_num(both - p.creep), 0.0)


class MeasuredRegimes:
    """Owns, per component, the stretch awaiting its check and the shortest next measurement.

    Parameters
    ----------
    config, kernel, ledger, pacing
        The engine's parts a stretch moves forward.
    ahead, history
        The fast mode's components ahead of the clock and signature histories (shared, updated here).
    """

    def __init__(
        self,
        *,
        config: SimConfig,
        kernel: EventKernel,
        ledger: Ledger,
        pacing: Pacing,
        ahead: dict[int, Ahead],
        history: dict[int, History],
    ) -> None:
        self._config = config
        self._kernel = kernel
        self._ledger = ledger
        self._pacing = pacing
        self._ahead = ahead
        self._history = history
        #: per component: the last stretch, until the detail after it has confirmed it
        self.pending: dict[int, Pending] = {}
        #: per component: the shortest measurement after a regime that did not hold
        self.min_window: dict[int, float] = {}
        self.log = CheckLog()

    def forget(self, comp: int) -> None:
        """A component that no longer exists (a decision ended its regime, checked or not)."""
        self.min_window.pop(comp, None)
        p = self.pending.pop(comp, None)
        if p is not None:
            self.log.unchecked_job_s += p.shift * p.rates.size

    def caught_up(self, comp: int, a: Ahead, runs: list[JobRun], t_now: float) -> None:
        """A decision shortens the component's stretch ``a`` to end at ``t_now`` (the clock, inside the
        stretch): each job keeps the iterations, and a creeping job the progress, its rate gives it up to
        now; the rest is taken back. The stretch goes unchecked."""
        n_jobs = len(runs)
        self.log.extrapolated_job_s -= (a.t_end - t_now) * n_jobs
        if self.pending.pop(comp, None) is not None:
            self.log.unchecked_job_s += (t_now - a.t0) * n_jobs
        assert a.rates is not None and a.credited is not None
        kernel = self._kernel
        with kernel.aside(back=t_now):
            kernel.move_to(a.t_end)
            due = np.rint(a.rates * (t_now - a.t0))
            credit = measured_credit(runs, a.links, t_now - a.t_end, due - a.credited)
            if a.creep is not None:
                credit = self._creep(runs, credit, a.creep, span=t_now - a.t_end)
            move(kernel, self._ledger, self._pacing, runs, credit, record=False)
            if a.jump is not None:
                self._ledger.sampler.truncate_jump(a.jump, t_now)

    def check(
        self, comp: int, runs: list[JobRun], hist: History, sig: Signature, links: NDArray[np.int64]
    ) -> bool:
        """At an anchor iteration start: whether a stretch of ``comp`` awaits its check (then handled)."""
        if comp not in self.pending:
            return False
        self._confirm(comp, runs, hist, sig, links)
        return True

    def measure(
        self, comp: int, runs: list[JobRun], hist: History, sig: Signature, links: NDArray[np.int64]
    ) -> None:
        """No period: jump at the jobs' measured rates if two consecutive windows agree, else go on.

        The stretch is at most as long as the detail it was measured over, and is checked by the detail
        that follows it (:mod:`commsched.sim.fast.checks`).
        """
        cfg = self._config
        est = measured_rates(
            hist,
            sig,
            min_iterations=cfg.fast_window_iterations,
            tolerance=cfg.fast_rate_tolerance,
            min_window_s=self.min_window.get(comp, 0.0),
        )
        if est is not None:
            then = hist[est.since]
            pending = Pending(
                t_end=0.0,
                shift=est.window_s,
                rates=est.rate,
                credited=np.zeros(0),
                seen_done=sig.done - then.done,
                seen_span=sig.start - then.start,
                window_s=est.window_s,
                creep=np.where(est.creeping, est.creep, np.nan) if est.creeping.any() else None,
            )
            if self._extrapolate(comp, runs, links, sig, pending):
                return
        remember(hist, sig, keep=self._config.fast_max_history)

    def _extrapolate(
        self, comp: int, runs: list[JobRun], links: NDArray[np.int64], sig: Signature, p: Pending
    ) -> bool:
        """Move the component forward at ``p.rates`` for at most ``p.shift`` seconds; whether it did.

        The stretch leaves before the horizon the detail its check needs (half of ``p.window_s``).
        """
        shift = min(p.shift, self._shift(runs, p.rates, p.window_s))
        creep = None if p.creep is None else np.nan_to_num(p.creep)
        if creep is not None:
            room = np.floor(sig.step) + 1.0 - sig.step  # the rest of each creeping job's step
            reach = float(np.min(np.where(creep > 0, room / np.maximum(creep, 1e-300), np.inf)))
            if reach < CREEP_WINDOWS * p.window_s:
                return False
            shift = min(shift, reach - 0.5 * p.window_s)
            shift = shift if shift >= 0.1 * p.window_s else 0.0
        if shift <= 0:
            return False
        credited = np.rint(p.rates * shift)
        credit = measured_credit(runs, links, shift, credited)
        if creep is not None:
            credit = self._creep(runs, credit, creep, span=shift)
        jump = move(self._kernel, self._ledger, self._pacing, runs, credit)
        now = self._kernel.now
        self._ahead[comp] = Ahead(
            t0=now,
            period=shift,
            m=1,
            then=sig,
            now=sig,
            links=links,
            jump=jump,
            rates=p.rates,
            credited=credited,
            creep=creep,
        )
        self.pending[comp] = Pending(
            t_end=now + shift,
            shift=shift,
            rates=p.rates,
            credited=credited,
            seen_done=p.seen_done,
            seen_span=p.seen_span,
            window_s=p.window_s,
            creep=p.creep,
        )
        self.log.extrapolated_job_s += shift * len(runs)
        self._history[comp] = History()  # the detail after the stretch checks it, and measures afresh
        return True

    def _confirm(
        self, comp: int, runs: list[JobRun], hist: History, sig: Signature, links: NDArray[np.int64]
    ) -> None:
        """Confirm the last stretch by the detail after it: go on twice as far, or re-credit it."""
        cfg = self._config
        p = self.pending[comp]
        v = confirm(p, hist[0], sig, min_iterations=cfg.fast_window_iterations) if hist else None
        if v is None:
            remember(hist, sig, keep=self._config.fast_max_history)
            return
        del self.pending[comp]
        if self.log.saw(v, tolerance=cfg.fast_rate_tolerance):
            creep = _creep_on(p, hist[0], sig)
            nxt = Pending(
                t_end=0.0,
                shift=2.0 * p.shift,
                rates=v.rates,
                credited=np.zeros(0),
                seen_done=v.done,
                seen_span=v.span,
                window_s=p.window_s,
                creep=creep,
            )
            if (p.creep is not None and creep is None) or not self._extrapolate(comp, runs, links, sig, nxt):
                remember(hist, sig, keep=self._config.fast_max_history)
            return
        # the regime did not hold: the stretch at the rates of all the detail around it, and longer windows
        # (a creeping job completed no iteration in the stretch: its progress through its step is fixed)
        due = np.rint(v.rates * p.shift) - p.credited
        if p.creep is not None:
            due = np.where(np.isnan(p.creep), due, 0.0)
        done = np.array([r.iterations_done for r in runs])
        top = np.array([np.inf if r.target_iterations is None else r.target_iterations - 1.0 for r in runs])
        due = np.clip(due, -done, np.maximum(top - done, 0.0))
        spread = self._spread(runs, due, p.shift)
        credit = measured_credit(runs, links, spread, due)
        fix = _creep_fix(p, hist[0], sig)
        if fix is not None:  # each creeping job moved on (back) to where the rate of all the detail puts it
            credit = self._creep(runs, credit, fix, span=p.shift)
            for r, x in zip(runs, fix.tolist(), strict=True):
                if x and r.active:
                    self._pacing.reschedule_step(r)
        correct(self._ledger, runs, credit, now=self._kernel.now)
        self.min_window[comp] = 2.0 * p.window_s
        remember(hist, sig, keep=self._config.fast_max_history)

    def _creep(self, runs: list[JobRun], c: Credit, creep: NDArray[np.float64], *, span: float) -> Credit:
        """``c`` with each creeping job moved ``creep * span`` of its step on (back, if negative), and the
        bytes that carries on the component's links (``c.links``)."""
        lb, liw = c.link_bytes.copy(), c.link_iw_bytes.copy()
        for r, x in zip(runs, creep.tolist(), strict=True):
            if x and r.active:
                on, moved = self._pacing.advance(r, x * span)
                pos = np.searchsorted(c.links, on)
                np.add.at(lb, pos, moved)
                np.add.at(liw, pos, moved * r.intensity)
        return Credit(
            shift=c.shift, done=c.done, busy=c.busy, links=c.links, link_bytes=lb, link_iw_bytes=liw
        )

    def _shift(self, runs: list[JobRun], rate: NDArray[np.float64], window_s: float) -> float:
        """How far a measured regime may be extrapolated: up to the horizon, short of its jobs' ends.

        Half the measurement before the horizon (the detail that checks the stretch) and three iterations
        of every job before its last are left to be simulated in detail (a job at rate 0, starved, stays
        where it is); a stretch shorter than a tenth of the measurement is not worth a jump (0).
        """
        shift = self._config.horizon_s - self._kernel.now - 0.5 * window_s
        for r, x in zip(runs, rate.tolist(), strict=True):
            if r.target_iterations is not None and x > 0:
                shift = min(shift, (r.target_iterations - r.iterations_done - 3.0) / x)
        return shift if shift >= 0.1 * window_s else 0.0

    def _spread(self, runs: list[JobRun], due: NDArray[np.float64], shift: float) -> float:
        """Over how long the sampler spreads a correction: at most the stretch corrected, within time the
        run is sure to reach (not past the horizon, nor past the earliest the component's jobs can all be
        done, each at least as slow as alone from here)."""
        least = 0.0
        for r, d in zip(runs, due.tolist(), strict=True):
            if r.target_iterations is None:
                least = math.inf
                break
            least = max(least, (r.target_iterations - r.iterations_done - d) * r.standalone_s)
        return max(0.0, min(shift, self._config.horizon_s - self._kernel.now, least))
