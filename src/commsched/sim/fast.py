"""Fast mode: detect the periodic steady state of a component and jump over its repetitions.

At each iteration start of a component's *anchor* job the component's :class:`Signature` is taken; when
it matches an earlier one (:mod:`commsched.sim.steady`), the stretch between them is a period, and the
component is moved ``m`` periods forward at once (:meth:`FastMode.apply_jump`): the same state, counters
credited ``m`` times. The component is then *ahead* of the clock; a decision that touches it brings it
back (:meth:`FastMode.catch_up`) by taking back the periods not yet due and replaying the rest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.traffic import JobTraffic
from commsched.sim.accounting import Jump, Ledger
from commsched.sim.kernel import EventKernel
from commsched.sim.pacing import Pacing
from commsched.sim.records import SimConfig
from commsched.sim.runs import EventKind, JobRun
from commsched.sim.steady import Signature, best_match, best_relative_match


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Ahead:
    """A component that a fast-mode jump moved ahead of the clock by ``m`` periods from ``t0``."""

    t0: float
    period: float
    m: int
    then: Signature
    now: Signature
    links: NDArray[np.int64]
    jump: Jump | None

    @property
    def t_end(self) -> float:
        return self.t0 + self.m * self.period


class FastMode:
    """Owns the fast mode's state: per component its anchor, signature history and jump ahead.

    Parameters
    ----------
    config
        Horizon and the fast mode's tolerances.
    runs, kernel, ledger, pacing
        The engine's parts it moves forward.
    dispatch
        Handles one event (used to replay a component's events on a catch-up).
    """

    def __init__(
        self,
        *,
        config: SimConfig,
        runs: Sequence[JobRun],
        kernel: EventKernel,
        ledger: Ledger,
        pacing: Pacing,
        dispatch: Callable[[EventKind, int, int], None],
    ) -> None:
        self._config = config
        self._runs = runs
        self._kernel = kernel
        self._ledger = ledger
        self._pacing = pacing
        self._dispatch = dispatch
        #: per component: the signatures taken at its anchor's iteration starts
        self._history: dict[int, list[Signature]] = {}
        #: per component: the traffic objects its signature links were computed from, and the links
        self._sig_links: dict[int, tuple[tuple[JobTraffic | None, ...], NDArray[np.int64]]] = {}
        #: per component: the job at whose iteration starts signatures are taken
        self._anchor: dict[int, int] = {}
        #: per component that has jumped ahead of the clock: the stretch it extrapolated
        self.ahead: dict[int, Ahead] = {}
        self._replaying = False  # catching a component up to the clock: no jumps
        #: catch-ups of components that were ahead of the clock (a diagnostic)
        self.catch_ups = 0

    # ------------------------------------------------------------------ components
    def forget(self, comps: Iterable[int]) -> None:
        """Components that no longer exist: drop their history, jump and anchor."""
        for c in comps:
            self._history.pop(c, None)
            self._sig_links.pop(c, None)
            self.ahead.pop(c, None)
            self._anchor.pop(c, None)

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
            self._anchor[c] = max(idxs, key=lambda i: (self._runs[i].standalone_s, -i))

    def on_iteration_start(self, r: JobRun, t: float) -> None:
        """An iteration of ``r`` starts at ``t``: at the anchor's starts, look for a period."""
        if not self._replaying and self._anchor.get(r.component) == r.index and self._kernel.now == t:
            self._maybe_jump(r.component)

    # ------------------------------------------------------------------ jumps
    def _signature(self, comp: int) -> tuple[Signature, NDArray[np.int64]]:
        runs = [self._runs[i] for i in self._pacing.components[comp]]
        for r in runs:
            self._pacing.settle(r)
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
            self._sig_links[comp] = (traffics, links)
        now = self._kernel.now
        sig = Signature(
            t=now,
            phase=np.array([(now - r.iteration_start_s) / max(r.standalone_s, 1e-12) for r in runs]),
            step=np.array(
                [(r.step + r.step_progress) if r.active else (-1.0 if not r.released else -2.0) for r in runs]
            ),
            done=np.array([r.iterations_done for r in runs]),
            busy=np.array([r.busy_gpu_s for r in runs]),
            last_end=np.array([r.last_end_s for r in runs]),
            link_bytes=self._ledger.link_bytes[links].copy(),
            link_iw_bytes=self._ledger.link_iw_bytes[links].copy(),
        )
        return sig, links

    def _maybe_jump(self, comp: int) -> None:
        """At an anchor iteration start: look for a period and, if found, repeat it as often as allowed."""
        runs = [self._runs[i] for i in self._pacing.components[comp]]
        if any(r.next_traffic is not None and r.next_traffic is not r.traffic for r in runs):
            return  # routes about to change: not a steady state yet
        sig, links = self._signature(comp)
        hist = self._history.setdefault(comp, [])
        cfg = self._config
        idx, dist = best_match(hist, sig)
        if idx < 0 or dist > cfg.fast_tolerance:
            # no exact period: the approximate one that misstates the jobs' throughputs least, accepted
            # at once within fast_rel_tolerance (the phases of quasi-periodic groups never meet
            # exactly) and after fast_max_history anchor iterations in any case
            idx, rel = best_relative_match(hist, sig)
            if idx < 0 and len(hist) >= cfg.fast_max_history:
                # no candidate in a full history: some job has not finished an iteration over it
                # (slowed far below its standalone speed); take signatures at its iteration starts
                adv = sig.done - hist[0].done
                k = int(np.argmin(adv))
                if adv[k] < 1 and runs[k].index != self._anchor.get(comp):
                    self._anchor[comp] = runs[k].index
                    self._history[comp] = []
                    return
            if idx < 0 or (rel > cfg.fast_rel_tolerance and len(hist) < cfg.fast_max_history):
                self._remember(hist, sig)
                return
        then = hist[idx]
        m = self._jump_count(runs, sig.t - then.t, sig.done - then.done)
        if m < 1:
            self._remember(hist, sig)
            return
        jump = self.apply_jump(runs, links, then, sig, m)
        self.ahead[comp] = Ahead(
            t0=self._kernel.now, period=sig.t - then.t, m=m, then=then, now=sig, links=links, jump=jump
        )
        # the regime goes on: keep the matched stretch of history, moved forward, for the next jump
        shift = m * (sig.t - then.t)
        self._history[comp] = [_shifted(h, then, sig, m, shift) for h in hist[idx:]]

    def _remember(self, hist: list[Signature], sig: Signature) -> None:
        """Keep the latest signatures only (a bounded search per anchor iteration)."""
        hist.append(sig)
        excess = len(hist) - 2 * self._config.fast_max_history
        if excess > 0:
            del hist[:excess]

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

        The jump repeated ``m`` periods from ``t0``; ``k`` of them have elapsed by now. The ``m - k``
        periods not yet due are taken back (counters, times and the sampler's record), and the part of
        the current period up to now is simulated, events of this component only (no other job shares
        its links, so nothing else can interleave).
        """
        kernel = self._kernel
        a = self.ahead.pop(comp, None)
        if a is None or kernel.now >= a.t_end:
            return
        self.catch_ups += 1
        t_now = kernel.now
        k = min(a.m, max(0, math.floor((t_now - a.t0) / a.period)))
        runs = [self._runs[i] for i in self._pacing.components[comp]]
        with kernel.aside():
            kernel.now = a.t_end
            self.apply_jump(runs, a.links, a.then, a.now, k - a.m, record=False)
            if a.jump is not None:
                self._ledger.sampler.truncate_jump(a.jump, a.t0 + k * a.period)
            kernel.now = a.t0 + k * a.period
            self._replaying = True
            try:
                while kernel and kernel.next_time() < t_now:
                    t, kind, _, job, version = kernel.pop()
                    kernel.now = t
                    kernel.events += 1
                    self._dispatch(EventKind(kind), job, version)
            finally:
                self._replaying = False
                kernel.now = t_now
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
        kernel, ledger = self._kernel, self._ledger
        shift = m * (now.t - then.t)
        busy_inc = 0.0
        for k, r in enumerate(runs):
            db = float(now.busy[k] - then.busy[k])
            r.iterations_done += m * float(now.done[k] - then.done[k])
            r.busy_gpu_s += m * db
            busy_inc += m * db
            r.last_end_s += shift
            r.iteration_start_s += shift
            r.compute_end_s += shift
            r.release_s += shift
            r.version += 1
            if r.computing:
                kernel.push(r.compute_end_s, EventKind.COMPUTE_END, r.index, r.version)
            if not r.released and not r.comm_done:
                kernel.push(r.release_s, EventKind.RELEASE, r.index, r.version)
            if r.active:
                r.settled_s = kernel.now + shift
                self._pacing.reschedule_step(r)
        ledger.busy_done_gpu_s += busy_inc
        lb = m * (now.link_bytes - then.link_bytes)
        liw = m * (now.link_iw_bytes - then.link_iw_bytes)
        ledger.link_bytes[links] += lb
        ledger.link_iw_bytes[links] += liw
        if not record:
            return None
        jump = Jump(
            t0=kernel.now,
            t1=kernel.now + shift,
            busy_gpu_s=busy_inc,
            links=links,
            link_bytes=lb,
            link_iw_bytes=liw,
        )
        ledger.sampler.add_jump(jump)
        return jump


def _shifted(h: Signature, then: Signature, now: Signature, m: int, shift: float) -> Signature:
    """An earlier signature ``h`` of a regime moved ``m`` periods (``shift`` seconds) forward."""
    return Signature(
        t=h.t + shift,
        phase=h.phase,
        step=h.step,
        done=h.done + m * (now.done - then.done),
        busy=h.busy + m * (now.busy - then.busy),
        last_end=h.last_end + shift,
        link_bytes=h.link_bytes + m * (now.link_bytes - then.link_bytes),
        link_iw_bytes=h.link_iw_bytes + m * (now.link_iw_bytes - then.link_iw_bytes),
    )
