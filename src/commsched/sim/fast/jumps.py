"""Fast-mode jumps: move a component's state forward in time and credit its counters.

A jump moves every job of a component by the same stretch of time, keeping the state it was in (the
phases of the jobs relative to each other, the steps in flight and their progress), and credits the
counters what the stretch adds: for a period repeated ``m`` times, ``m`` times its increments
(:func:`periodic_credit`); for a regime measured at rates, each job's iterations at its rate, and the
busy time and bytes those iterations carry (:func:`measured_credit`). :func:`move` applies a credit and
records the stretch with the sampler, which spreads it evenly over the time it stands for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from commsched.sim.fast.steady import Signature
from commsched.sim.jobs.iteration import credit, shift
from commsched.sim.jobs.runs import EventKind, JobRun
from commsched.sim.loop.kernel import EventKernel
from commsched.sim.rates.pacing import Pacing
from commsched.sim.results.accounting import Jump, Ledger


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Ahead:
    """A component that a fast-mode jump moved ahead of the clock by ``m`` periods from ``t0``.

    A jump at measured rates has ``m = 1``, its stretch as ``period``, the rates (iterations per second)
    and the iterations it credited each job, and the rate its creeping jobs were moved through their
    steps at (fractions of the step per second; 0 for the others).
    """

    t0: float
    period: float
    m: int
    then: Signature
    now: Signature
    links: NDArray[np.int64]
    jump: Jump | None
    rates: NDArray[np.float64] | None = None
    credited: NDArray[np.float64] | None = None
    creep: NDArray[np.float64] | None = None

    @property
    def t_end(self) -> float:
        return self.t0 + self.m * self.period


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Credit:
    """What a jump adds: a time shift, and per job its iterations and busy GPU-seconds, per link bytes."""

    shift: float
    done: NDArray[np.float64]
    busy: NDArray[np.float64]
    links: NDArray[np.int64]
    link_bytes: NDArray[np.float64]
    link_iw_bytes: NDArray[np.float64]


def periodic_credit(
    runs: list[JobRun], links: NDArray[np.int64], then: Signature, now: Signature, m: int
) -> Credit:
    """``m`` repetitions of the period from ``then`` to ``now`` (``m`` may be negative: taken back).

    The bytes are credited per job, its iterations in the period times its traffic's bytes per
    iteration: a link that another component loads too (one that cannot saturate,
    :mod:`commsched.sim.decide.partition`) carries that component's bytes in the counters as well."""
    done = m * (now.done - then.done)
    lb, liw = _job_bytes(runs, links, done)
    return Credit(
        shift=m * (now.t - then.t),
        done=done,
        busy=m * (now.busy - then.busy),
        links=links,
        link_bytes=lb,
        link_iw_bytes=liw,
    )


def measured_credit(
    runs: list[JobRun], links: NDArray[np.int64], shift: float, done: NDArray[np.float64]
) -> Credit:
    """``shift`` seconds at measured rates: job ``k`` completes ``done[k]`` iterations.

    Busy time and bytes follow from the iterations: each completes one compute and moves the bytes of
    the job's traffic (``links`` are the component's links, sorted; every job's links are among them).
    """
    busy = np.array([done[k] * r.gpu_count * r.spec.busy_s for k, r in enumerate(runs)])
    lb, liw = _job_bytes(runs, links, done)
    return Credit(shift=shift, done=done, busy=busy, links=links, link_bytes=lb, link_iw_bytes=liw)


def _job_bytes(
    runs: list[JobRun], links: NDArray[np.int64], done: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Bytes and intensity-weighted bytes on ``links`` (sorted) of ``done[k]`` iterations of each job."""
    lb, liw = np.zeros(links.size), np.zeros(links.size)
    for k, r in enumerate(runs):
        if r.traffic is not None and r.traffic.link_ids.size:
            pos = np.searchsorted(links, r.traffic.link_ids)
            moved = done[k] * r.traffic.link_bytes
            lb[pos] += moved
            liw[pos] += moved * r.intensity
    return lb, liw


def move(
    kernel: EventKernel, ledger: Ledger, pacing: Pacing, runs: list[JobRun], c: Credit, *, record: bool = True
) -> Jump | None:
    """Shift the component's state ``c.shift`` seconds forward and add ``c``'s increments.

    Every job keeps its state, moved in time: its pending events are pushed again at their new times.
    Returns the sampler's record of the stretch when ``record``.
    """
    busy_inc = 0.0
    for k, r in enumerate(runs):
        db = float(c.busy[k])
        shift(r, c.shift, float(c.done[k]), db)
        busy_inc += db
        if r.computing:
            kernel.push(r.compute_end_s, EventKind.COMPUTE_END, r.index, r.version)
        if not r.released and not r.comm_done:
            kernel.push(r.release_s, EventKind.RELEASE, r.index, r.version)
        if r.active:
            pacing.reschedule_step(r, settled_s=kernel.now + c.shift)
    ledger.busy_done_gpu_s += busy_inc
    ledger.link_bytes[c.links] += c.link_bytes
    ledger.link_iw_bytes[c.links] += c.link_iw_bytes
    if not record:
        return None
    jump = Jump(
        t0=kernel.now,
        t1=kernel.now + c.shift,
        busy_gpu_s=busy_inc,
        links=c.links,
        link_bytes=c.link_bytes,
        link_iw_bytes=c.link_iw_bytes,
    )
    ledger.sampler.add_jump(jump)
    return jump


def shifted(h: Signature, then: Signature, now: Signature, m: int, shift: float) -> Signature:
    """An earlier signature ``h`` of a regime moved ``m`` periods (``shift`` seconds) forward."""
    return Signature(
        t=h.t + shift,
        phase=h.phase,
        step=h.step,
        done=h.done + m * (now.done - then.done),
        start=h.start + shift,
        busy=h.busy + m * (now.busy - then.busy),
        last_end=h.last_end + shift,
        link_bytes=h.link_bytes + m * (now.link_bytes - then.link_bytes),
        link_iw_bytes=h.link_iw_bytes + m * (now.link_iw_bytes - then.link_iw_bytes),
    )


def correct(ledger: Ledger, runs: list[JobRun], c: Credit, *, now: float) -> None:
    """Add ``c``'s increments to the counters without moving anything in time.

    A stretch whose check found that its regime did not hold is re-credited this way. The counters take
    the correction at once; the sampler spreads it over ``[now, now + c.shift)`` (``c.shift`` no longer
    than the stretch it corrects, and ending by the horizon), so that the time series show it as a
    change of rate as large as the stretch's error, not as one interval's spike or dip.
    """
    for k, r in enumerate(runs):
        credit(r, float(c.done[k]), float(c.busy[k]))
    busy = float(c.busy.sum())
    ledger.busy_done_gpu_s += busy
    ledger.link_bytes[c.links] += c.link_bytes
    ledger.link_iw_bytes[c.links] += c.link_iw_bytes
    ledger.sampler.add_jump(
        Jump(
            t0=now,
            t1=now + c.shift,
            busy_gpu_s=busy,
            links=c.links,
            link_bytes=c.link_bytes,
            link_iw_bytes=c.link_iw_bytes,
        )
    )
