"""Fast mode: regimes extrapolated at measured rates, each stretch bounded and checked by the detail after it.

A component without a period is *measured*: once every job's rate agrees over two consecutive windows
of its detailed simulation (:func:`commsched.sim.steady.measured_rates`), it is moved forward by a
stretch at most as long as that detail, each job credited the iterations it completes at its measured
rate. The detail after the stretch checks it (:mod:`commsched.sim.checks`): a regime that held may go on
twice as far; one that did not is re-credited at the rates of all the detail around the stretch and
measured again over windows twice as long.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from commsched.sim.accounting import Ledger
from commsched.sim.checks import CheckLog, Pending, confirm
from commsched.sim.jumps import Ahead, correct, measured_credit, move
from commsched.sim.kernel import EventKernel
from commsched.sim.pacing import Pacing
from commsched.sim.records import SimConfig
from commsched.sim.runs import JobRun
from commsched.sim.steady import Signature, measured_rates, remember


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
        history: dict[int, list[Signature]],
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

    def caught_up(self, comp: int, a: Ahead, t_now: float, n_jobs: int) -> None:
        """A decision shortened the component's stretch ``a`` to end at ``t_now``: it goes unchecked."""
        self.log.extrapolated_job_s -= (a.t_end - t_now) * n_jobs
        if self.pending.pop(comp, None) is not None:
            self.log.unchecked_job_s += (t_now - a.t0) * n_jobs

    def check(
        self, comp: int, runs: list[JobRun], hist: list[Signature], sig: Signature, links: NDArray[np.int64]
    ) -> bool:
        """At an anchor iteration start: whether a stretch of ``comp`` awaits its check (then handled)."""
        if comp not in self.pending:
            return False
        self._confirm(comp, runs, hist, sig, links)
        return True

    def measure(
        self, comp: int, runs: list[JobRun], hist: list[Signature], sig: Signature, links: NDArray[np.int64]
    ) -> None:
        """No period: jump at the jobs' measured rates if two consecutive windows agree, else go on.

        The stretch is at most as long as the detail it was measured over, and is checked by the detail
        that follows it (:mod:`commsched.sim.checks`).
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
        if shift <= 0:
            return False
        credited = np.rint(p.rates * shift)
        jump = move(
            self._kernel, self._ledger, self._pacing, runs, measured_credit(runs, links, shift, credited)
        )
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
        )
        self.pending[comp] = Pending(
            t_end=now + shift,
            shift=shift,
            rates=p.rates,
            credited=credited,
            seen_done=p.seen_done,
            seen_span=p.seen_span,
            window_s=p.window_s,
        )
        self.log.extrapolated_job_s += shift * len(runs)
        self._history[comp] = []  # the detail after the stretch checks it, and measures afresh
        return True

    def _confirm(
        self, comp: int, runs: list[JobRun], hist: list[Signature], sig: Signature, links: NDArray[np.int64]
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
            nxt = Pending(
                t_end=0.0,
                shift=2.0 * p.shift,
                rates=v.rates,
                credited=np.zeros(0),
                seen_done=v.done,
                seen_span=v.span,
                window_s=p.window_s,
            )
            if not self._extrapolate(comp, runs, links, sig, nxt):
                remember(hist, sig, keep=self._config.fast_max_history)
            return
        # the regime did not hold: the stretch at the rates of all the detail around it, and longer windows
        due = np.rint(v.rates * p.shift) - p.credited
        done = np.array([r.iterations_done for r in runs])
        top = np.array([np.inf if r.target_iterations is None else r.target_iterations - 1.0 for r in runs])
        due = np.clip(due, -done, np.maximum(top - done, 0.0))
        spread = self._spread(runs, due, p.shift)
        correct(self._ledger, runs, measured_credit(runs, links, spread, due), now=self._kernel.now)
        self.min_window[comp] = 2.0 * p.window_s
        remember(hist, sig, keep=self._config.fast_max_history)

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
