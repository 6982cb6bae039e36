"""Iterations where the byte split finds none: the byte rate at the profiling window's bytes per
iteration, refined by the periodogram's harmonics (``runtime.profiling.harmonics``), and a split that
disagrees with those bytes refused (``testbed_run.command_report.job_iterations``).

On recorded testbed windows (``data/``: the hosts' byte counters and rank 0's log, crux-full, starved
jobs); the expected iteration is the mean spacing of the times rank 0 logged in the window.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from commsched.experiments.testbed_run.command_report import agreed_iterations, job_iterations
from commsched.runtime.profiling.harmonics import harmonic_period
from commsched.runtime.profiling.traffic import series

DATA = Path(__file__).parent / "data"


def _doc(name: str) -> dict[str, Any]:
    return dict(json.loads(gzip.decompress((DATA / f"{name}-starved-window.json.gz").read_bytes())))


def _logged(doc: dict[str, Any], start: float, end: float) -> float:
    t = [e["t"] for e in doc["log"] if start <= e["t"] < end and re.match(r"iteration \d+ ", e["line"])]
    return float((t[-1] - t[0]) / (len(t) - 1))


def _both(doc: dict[str, Any], start: float, end: float) -> list[np.ndarray]:
    out = []
    for tr in doc["hosts"].values():
        dt, t = float(tr["sample_s"]), np.asarray(tr["t"])
        rx = series(t, np.asarray(tr["rx_data_bytes"], float), sample_s=dt, start=start, end=end)
        tx = series(t, np.asarray(tr["data_bytes"], float), sample_s=dt, start=start, end=end)
        out.append(rx + tx)
    return out


@pytest.mark.parametrize(("name", "logged_s"), [("quad-merged", 1.60), ("quad", 1.51)])
def test_the_bytes_period_finds_a_starved_jobs_iteration_without_a_split(name: str, logged_s: float) -> None:
    """The profiling window's bytes per iteration (its hosts' split) and the measuring window's byte
    rate give the iteration rank 0 logged, within 5 %, without the measuring window's split."""
    doc = _doc(name)
    start, end = 0.0, float(doc["end"]) - float(doc["start"])
    reference = _logged(doc, start, end)
    assert reference == pytest.approx(logged_s, abs=0.01)
    traffic = list(doc["hosts"].values())
    profiled = agreed_iterations(traffic, start=float(doc["profiling_start"]), end=start)
    assert profiled is not None
    found = harmonic_period(
        _both(doc, start, end), sample_s=float(traffic[0]["sample_s"]), bytes_per_iteration=profiled["bytes"]
    )
    assert found is not None and found.period_s == pytest.approx(reference, rel=0.05)


def test_a_split_that_disagrees_with_the_profiling_windows_bytes_is_refused() -> None:
    """``quad-merged``: both hosts cut the measuring window into pairs of iterations (3.21 s, twice the
    logged 1.60 s, 12.6 MB per iteration). Held to bytes per iteration a third of the pair's (no split
    carries them) the pair is refused and the byte rate reads 2/3 of the logged iteration; held to the
    pair's own bytes it stands; held to the profiling window's, the iteration is the logged one."""
    doc = _doc("quad-merged")
    start, end = 0.0, float(doc["end"]) - float(doc["start"])
    traffic = list(doc["hosts"].values())
    reference = _logged(doc, start, end)
    merged = agreed_iterations(traffic, start=start, end=end)
    assert merged is not None and merged["mean"] == pytest.approx(2 * reference, rel=0.05)
    kept, how = job_iterations(traffic, start=start, end=end, known_bytes=merged["bytes"])
    assert how == "bytes" and kept is not None and kept["mean"] == pytest.approx(merged["mean"])
    third, how = job_iterations(traffic, start=start, end=end, known_bytes=merged["bytes"] / 3)
    assert how in ("harmonics", "byte-rate"), how
    assert third is not None and third["mean"] == pytest.approx(2 * reference / 3, rel=0.05)
    profiled = agreed_iterations(traffic, start=float(doc["profiling_start"]), end=start)
    assert profiled is not None
    right, how = job_iterations(traffic, start=start, end=end, known_bytes=profiled["bytes"])
    assert right is not None and right["mean"] == pytest.approx(reference, rel=0.05)


def test_harmonics_refine_the_byte_rate_on_a_clean_train() -> None:
    """Iterations of 0.9 s (two bursts each, 340 kB in all), the window cut mid-iteration at both
    ends: the byte rate is off by the part-iterations (1-2 %), the comb of the harmonics finds 0.9 s;
    a third of the bytes per iteration finds a third of it (the bytes choose the harmonic)."""
    one = np.r_[np.zeros(50), np.full(20, 1e4), np.zeros(6), np.full(14, 1e4)]
    y = np.tile(one, 30)[37:-41]
    h = harmonic_period([y], sample_s=0.01, bytes_per_iteration=3.4e5)
    assert h is not None and h.method == "harmonics"
    assert h.period_s == pytest.approx(0.9, rel=0.003)
    assert abs(h.bytes_period_s / 0.9 - 1) > 0.003  # the bytes alone are further off
    third = harmonic_period([y], sample_s=0.01, bytes_per_iteration=3.4e5 / 3)
    assert third is not None and third.period_s == pytest.approx(0.3, rel=0.02)
