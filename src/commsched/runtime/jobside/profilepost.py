"""A job process's profile as Crux measures it, posted to the daemon at the end of its window.

:class:`ProfilePoster` wraps :class:`commsched.runtime.profiling.profiler.Profiler` for a job process
(:mod:`commsched.runtime.jobside.jobproc`): the transport's observer feeds it every chunk sent, the job
reports the compute of every iteration, and once the window is full it posts ``W_j``, ``t_j`` and
the iteration period to the daemon (``PUT /v1/jobs/{id}/profile``) over the daemon's Unix socket.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from pathlib import Path

from commsched.runtime.http.localclient import LocalClient
from commsched.runtime.jobside.specs import ProfileReportJSON, ProfileSpecJSON
from commsched.runtime.profiling.body import MeasuredProfile, profile_body
from commsched.runtime.profiling.profiler import Profiler, job_period

__all__ = ["ProfilePoster"]


class ProfilePoster:
    """The job's profiler and, once its window is full, the one post of the profile to the daemon.

    ``spec`` is the job spec's ``profile`` object: ``window_s``, and optionally ``min_iterations``
    (default 3: the window is extended until it holds that many of the job's iterations), ``daemon``
    (the daemon's Unix socket), ``token_file``, ``compute_scale``, ``bytes_scale``, ``time_scale``
    (factors from what this process measures to the job's units). The post runs in a background
    thread so that the data path never waits for it; :attr:`report` holds what was measured and the
    daemon's answer.

    The period is :func:`commsched.runtime.profiling.profiler.job_period` of the FFT's
    (:meth:`Profiler.profile`) and the job's iteration ends (``period_from`` in the report says which).
    """

    def __init__(self, job: str, spec: ProfileSpecJSON) -> None:
        self.job = job
        self.spec = spec
        self.window_s = float(spec["window_s"])
        self.min_iterations = int(spec.get("min_iterations", 3))
        self.profiler = Profiler(job=job, window_s=1e9)  # the window ends when this class says
        self.report: ProfileReportJSON | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._first: float | None = None
        self._bytes = 0
        self._reports: list[tuple[float, float]] = []  # (monotonic end of iteration, its compute)

    def record_transfer(self, start: float, end: float, nbytes: int) -> None:
        """The transport's observer: one chunk sent."""
        self.profiler.record_transfer(start, end, nbytes)
        with self._lock:
            if self._first is None:
                self._first = start
            self._bytes += nbytes

    def after_iteration(self, compute_s: float) -> None:
        """Report the iteration's compute; start the post once the window is full (once)."""
        now = time.monotonic()
        self.profiler.report_compute(compute_s, t=now)
        self._reports.append((now, compute_s))
        with self._lock:
            first = self._first
        full = first is not None and now - first >= self.window_s
        if self._thread is None and full and len(self._reports) >= self.min_iterations:
            self._thread = threading.Thread(target=self._post, name="profile-post", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Wait for a post in flight."""
        if self._thread is not None:
            self._thread.join(timeout=30.0)

    def _period(self, rep: ProfileReportJSON) -> float:
        ends = [t for t, _ in self._reports]
        fft: float | None = None
        try:
            prof = self.profiler.profile()
            rep["measured"] = prof.to_json()
            fft = prof.period_s
        except Exception as exc:  # no period in the series: the job's own iterations
            rep["fft_error"] = f"{type(exc).__name__}: {exc}"
        est = job_period(fft, ends)
        if fft is not None:
            rep["period_factor"] = est.factor
        rep["period_from"] = est.method
        return est.period_s

    def _post(self) -> None:
        sp = self.spec
        rep: ProfileReportJSON = {}
        try:
            with self._lock:
                first, sent = self._first, self._bytes
            window = time.monotonic() - (first if first is not None else time.monotonic())
            period = self._period(rep)
            work = [w for _, w in self._reports]
            t_scale = float(sp.get("time_scale", 1.0))
            body = profile_body(
                MeasuredProfile(
                    # W_j: the compute the job reported per iteration (one report per iteration)
                    compute_s=sum(work) / len(work) * float(sp.get("compute_scale", 1.0)),
                    # t_j: bytes sent in the window per iteration of the period
                    comm_bytes=sent * period / window * float(sp.get("bytes_scale", 1.0)),
                    period_s=period * t_scale,
                )
            )
            rep["window_s"] = window
            rep["posted"] = body
            if sp.get("daemon") and sp.get("token_file"):
                token = Path(str(sp["token_file"])).read_text().strip()
                daemon = LocalClient(f"unix:{sp['daemon']}", token=token, timeout=10.0)
                resp = daemon.put(f"/v1/jobs/{urllib.parse.quote(self.job)}/profile", json=body)
                rep["status"] = resp.status_code
                rep["answer"] = resp.json() if resp.content else {}
        except Exception as exc:  # reported in the result; the job goes on with the declared profile
            rep["error"] = f"{type(exc).__name__}: {exc}"
        self.report = rep
