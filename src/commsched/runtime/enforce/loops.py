"""The enforcer's background loops: held connections, the hold's heartbeat, counter samples, profiles.

* **watch** (every 100 ms): a job's socket in ``SYN_SENT`` towards a fabric address whose
  ``(source, destination, port)`` is not decided yet is a held connection: its key is pinned on a
  worker (:meth:`Enforcer.request_pin`) before TCP sends the SYN again (1 s). Every second the
  ``alive`` set is refreshed, so that a dead agent stops holding SYNs within
  :attr:`EnforcerConfig.hold_timeout_s`, and a key whose ports are half taken by tracked
  connections gets a fresh set (:meth:`.pins.Pinning.widen`), so that a new connection never
  finds every port of its set taken.
* **sample** (every :attr:`EnforcerConfig.sample_s`): the jobs' counters in one netlink dump
  (:mod:`.nflink`); once a job's traffic spans its profiling window on the host of its first rank,
  its profile (:func:`.traffic.outside_profile`) is posted to the daemon.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

import numpy as np

from commsched.runtime.enforce.host import EnforcerView, JobProfileJSON, JobState, ProfilePoster
from commsched.runtime.enforce.marking.conns import SYN_SENT, read_sockets, socket_inodes
from commsched.runtime.enforce.marking.nflink import CounterReader
from commsched.runtime.enforce.pins import Pinning

# ``profile_body`` stays importable from here (the testbed's twin profile imports it): the one body
from commsched.runtime.profiling.body import host_profile_body as profile_body
from commsched.runtime.profiling.compute import compute_of
from commsched.runtime.profiling.profilecheck import check_profile
from commsched.runtime.profiling.traffic import outside_profile, series, steady, window_iterations

__all__ = ["LoopHost", "Loops", "profile_body", "profile_now"]

WATCH_S = 0.1
ALIVE_EVERY_S = 1.0
PROFILE_EVERY_S = 0.5
CONTINUOUS = 0.9
#: a job's profiling window grows by one window per profile not posted, up to this many windows
PROFILE_GROWTH = 4


class LoopHost(EnforcerView, Protocol):
    """What the loops need of their enforcer besides its view: pins, profile poster, upkeep."""

    @property
    def pinning(self) -> Pinning: ...

    @property
    def poster(self) -> ProfilePoster | None: ...

    def request_pin(self, key: tuple[int, str, str, int]) -> None:
        """Decide the ports of ``key`` (a held connection) on a worker thread."""
        ...

    def refresh_alive(self) -> None:
        """Forget the processes that exited."""
        ...

    def forget_idle(self) -> None:
        """Drop the jobs that left the view and have no process."""
        ...


class Loops:
    """The two threads of one enforcer (stopped together)."""

    def __init__(self, enforcer: LoopHost) -> None:
        self.e = enforcer
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._watch, name="enforce-watch", daemon=True),
            threading.Thread(target=self._sample, name="enforce-sample", daemon=True),
        ]
        self.errors: list[str] = []

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5.0)

    def _note(self, exc: Exception) -> None:
        msg = f"{type(exc).__name__}: {exc}"
        if msg not in self.errors[-5:]:
            self.errors.append(msg)
            del self.errors[:-20]

    # ------------------------------------------------------------------ watch

    def _watch(self) -> None:
        last_alive = 0.0
        while not self._stop.wait(WATCH_S):
            try:
                self._held()
                now = time.monotonic()
                if now - last_alive >= ALIVE_EVERY_S:
                    last_alive = now
                    self._alive()
            except Exception as exc:  # the loop must outlive a failed command; the error is reported
                self._note(exc)

    def _alive(self) -> None:
        self.e.refresh_alive()
        self.e.forget_idle()
        self.e.pinning.widen()

    def _held(self) -> None:
        e = self.e
        with e.lock:
            ips = e.view.nic_ips
            fabric = {ips[c.dst_nic] for c in e.view.connections if c.dst_nic in ips}
            fabric |= {ips[c.src_nic] for c in e.view.inbound if c.src_nic in ips}
            decided = {k[1:] for k in e.pinning.pins} | {k[1:] for k in e.pinning.inflight}
        waiting = [
            s
            for s in read_sockets()
            if s.state == SYN_SENT and s.remote[0] in fabric and (s.local[0], *s.remote) not in decided
        ]
        if not waiting:
            return
        with e.lock:
            jobs = list(e.jobs.values())
        for job in jobs:
            inodes = socket_inodes(job.cgroup.pids())
            for s in waiting:
                if s.inode in inodes:
                    e.request_pin((job.mark, s.local[0], s.remote[0], s.remote[1]))

    # ------------------------------------------------------------------ sample

    def _sample(self) -> None:
        e = self.e
        reader: CounterReader | None = None
        try:
            reader = CounterReader(e.table)
            while not self._stop.wait(e.cfg.sample_s):
                try:
                    self._one(reader)
                except Exception as exc:  # reported; sampling goes on
                    self._note(exc)
        except Exception as exc:  # no netlink: no samples (reported in /health)
            self._note(exc)
        finally:
            if reader is not None:
                reader.close()

    def _one(self, reader: CounterReader) -> None:
        e = self.e
        with e.lock:
            active = [j for j in e.jobs.values() if j.procs or j.cgroup.pids()]
        if not active:
            return
        values = reader.read()
        now = time.time()
        with e.lock:
            for j in active:
                d, a, h, r = (values.get(f"{c}_{j.name}") for c in ("txd", "tx", "held", "rxd"))
                if d is not None and a is not None and h is not None and r is not None:
                    j.samples.append((now, d.bytes, a.bytes, h.packets, r.bytes))
        for j in active:
            self._maybe_profile(j)

    def _maybe_profile(self, job: JobState) -> None:
        """Post ``job``'s profile once the last window of its traffic shows steady iterations.

        Only the host of the job's first rank posts. The window slides until it holds at least three
        regular bursts (:func:`.traffic.steady`), so the start-up (connections, the first broadcast)
        is not profiled; a profile that is not posted (:func:`profile_now`) is tried again on a
        window half new and longer by one profiling window per try (up to :data:`PROFILE_GROWTH`
        times it: more iterations for the bytes to tell apart); a job whose traffic never pauses
        (in :data:`CONTINUOUS` of the bins at least: its communication hidden behind its compute)
        is profiled by its spectrum alone, over the window that ends two windows after its first
        byte.
        """
        e = self.e
        tries = int(job.profile.get("tries", 0)) if job.profile is not None else 0
        window = job.profile_window_s * min(1 + tries, PROFILE_GROWTH)
        if window <= 0 or (job.profile is not None and "rejected" not in job.profile) or e.poster is None:
            return
        if job.profile is not None and time.time() - float(job.profile["at"]) < window / 2:
            return  # rejected: the next try on a window half new
        decided = e.view.jobs.get(job.id)
        hosts = decided.hosts if decided is not None else ()
        if not hosts or hosts[0] != e.cfg.host:
            return
        with e.lock:
            rows = list(job.samples)
        first = next((r[0] for r in rows if r[4] > 0), None)
        now = rows[-1][0] if rows else 0.0
        if first is None or now - first < window or now - job.profile_checked < PROFILE_EVERY_S:
            return
        job.profile_checked = now
        t = [r[0] for r in rows]
        rx = [float(r[4]) for r in rows]
        dt = e.cfg.sample_s
        try:
            st = window_iterations(
                t, rx, [float(r[1]) for r in rows], sample_s=dt, start=now - window, end=now
            )
            x = series(t, rx, sample_s=dt, start=now - window, end=now)
            continuous = st.method == "fft" and float(np.mean(x > 0)) >= CONTINUOUS
            if not steady(st) and not (continuous and now - first >= 2 * window):
                return
            job.profile = {"pending": True, "tries": tries}  # posted once, by the thread below
        except Exception:  # no period yet: wait for more traffic
            return
        threading.Thread(
            target=profile_now, args=(e, job, now - window, now), name="profile-post", daemon=True
        ).start()


def profile_now(e: LoopHost, job: JobState, start: float, end: float) -> JobProfileJSON:
    """Profile ``job`` over ``[start, end)`` of its samples, post it to the daemon, keep and return it.

    A profile whose parts disagree (:func:`.profilecheck.check_profile`) is not posted: it is kept
    with the reason (``rejected``), and the sampling loop profiles a later window. Raises
    :class:`~commsched.errors.InputError` when that window shows no iterations.
    """
    with e.lock:
        rows = list(job.samples)
    t = [r[0] for r in rows]
    rx = [float(r[4]) for r in rows]  # the pace of the wire
    tx = [float(r[1]) for r in rows]  # what this host sends
    prof = outside_profile(t, rx, tx, sample_s=e.cfg.sample_s, start=start, end=end)
    dt = e.cfg.sample_s
    why = check_profile(
        prof.to_json(),
        rx=series(t, rx, sample_s=dt, start=start, end=end),
        tx=series(t, tx, sample_s=dt, start=start, end=end),
        sample_s=dt,
    )
    if why is not None:  # not posted: the job keeps what the daemon has; a later window may do
        tries = int(job.profile.get("tries", 0)) + 1 if isinstance(job.profile, dict) else 1
        job.profile = {
            "measured": prof.to_json(),
            "rejected": why,
            "at": time.time(),
            "window": [start, end],
            "tries": tries,
        }
        return job.profile
    measured = prof.to_json()
    body = profile_body({**measured, "compute_s": _compute(e, job, measured)}, e.view, job.id)
    out: JobProfileJSON = {
        "measured": measured,
        "posted": body,
        "at": time.time(),
        "window": [start, end],
    }
    job.profile = out
    if e.poster is not None:
        try:
            out["answer"] = e.poster(job.id, body)
        except Exception as exc:  # the job keeps its declared profile; the error is in the report
            out["answer"] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def _compute(e: LoopHost, job: JobState, measured: dict[str, Any]) -> float:
    """The compute a profile posts: the host's silent time per iteration, but in a stalled window
    (the job starved there) its silence between iterations, which its waits for peers lengthen
    less (:mod:`commsched.runtime.profiling.compute`): a starved job posted as computing longer
    looks less communication-bound than it is, and a policy that ranks by that keeps it starved."""
    decided = e.view.jobs.get(job.id)
    gpus = decided.gpus if decided is not None else ()
    here = sum(1 for g in gpus if g.split("/", 1)[0] == e.cfg.host)
    got = compute_of({e.cfg.host: measured}, several={e.cfg.host} if here > 1 else ())
    stalled_window = str(got["compute_from"]).endswith("stalled window")
    return float(got["compute_s"]) if stalled_window else float(measured["compute_s"])
