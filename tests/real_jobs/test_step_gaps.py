"""The gaps between a ring's synchronous steps, read from its hosts' byte counters, on recorded windows
of jobs that nothing of their class or above shared a link with.

``data/*-alone-measuring-window``: a ring of three (``--dim 512``) and a ring of two (``--dim 768``) of
the shipped gloo example over ``crux_testbed``'s 62.5 Mbit/s uplinks, 30 s each, with rank 0's log.
Expected values from outside the estimate: the program's gradients (``2 (dim^2 + dim)`` float32), of
which each host of a ring of ``n`` receives ``2 (n - 1) / n`` per iteration, at the links' TCP
goodput, and the iteration the program logged: what the log's iteration holds beyond the compute
and those bytes is the time the job's links carried none of its bytes.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from commsched.experiments.testbed_run.twin import GOODPUT
from commsched.experiments.testbed_run.twin_profile import compute_over, twin_profile
from commsched.runtime.profiling.stepgaps import step_gaps_s
from commsched.runtime.profiling.traffic import outside_profile

from .test_twin_compute import _job, _pair_decision

DATA = Path(__file__).parent / "data"
UPLINK_BPS = 100e9 * 0.000625 * GOODPUT  # TCP payload bits/s of a ToR-Agg link at the run's scale


def _doc(name: str) -> dict[str, Any]:
    return dict(json.loads(gzip.decompress((DATA / f"{name}-alone-measuring-window.json.gz").read_bytes())))


@pytest.mark.parametrize(("name", "dim", "ranks"), [("trio", 512, 3), ("duo", 768, 2)])
def test_the_step_gaps_are_what_the_logged_iteration_holds_beyond_compute_and_bytes(
    name: str, dim: int, ranks: int
) -> None:
    doc = _doc(name)
    start, end = float(doc["start"]), float(doc["end"])
    logged_t = [
        e["t"] for e in doc["log"] if start <= e["t"] <= end and re.match(r"iteration \d+ ", e["line"])
    ]
    logged = (logged_t[-1] - logged_t[0]) / (len(logged_t) - 1)
    received = 2 * (ranks - 1) / ranks * 2 * (dim * dim + dim) * 4  # bytes a host receives per iteration
    bytes_s = received * 8 / UPLINK_BPS
    gaps, computes = [], []
    for tr in doc["hosts"].values():
        prof = outside_profile(
            tr["t"],
            tr["rx_data_bytes"],
            tr["data_bytes"],
            sample_s=float(tr["sample_s"]),
            start=start,
            end=end,
        )
        assert prof.method == "bytes"
        assert prof.period_s == pytest.approx(logged, rel=0.01)
        computes.append(prof.gap_s)  # the silence between iterations: the compute the twin takes
        got = step_gaps_s(tr, start=start, end=end, period_s=prof.period_s)
        assert got is not None
        gaps.append(got)
    compute, gap = max(computes), min(gaps)  # as the twin takes them (compute_of, pauses.job_pause)
    assert gap == pytest.approx(logged - compute - bytes_s, abs=0.005)
    # the twin of such a job alone: compute, gaps and bytes; without the gaps it is 2.5 % fast or more
    assert compute + gap + bytes_s == pytest.approx(logged, rel=0.01)
    assert logged / (compute + bytes_s) - 1 > 0.025
    assert statistics.pstdev(gaps) < 0.005  # every host of the ring reads the same gaps


def test_the_twin_takes_the_compute_and_pauses_of_the_clean_measuring_window() -> None:
    """The recorded ring of two, cut into a profiling window (its first 12 s, whose agent posted a
    profile) and a measuring window (the rest): both are clean and agree on the bytes, and the twin's
    compute and pauses are the measuring window's reading (where the twin is compared with the
    program), not the profiling window's, whatever the agent posted there."""
    doc = _doc("duo")
    start, end = float(doc["start"]), float(doc["end"])
    hosts = list(doc["hosts"])
    job = _job(hosts, 1)
    decision = _pair_decision(job, hosts)
    posted = {"compute_s": 0.5, "comm_bytes": 2 * (768 * 768 + 768) * 4, "period_s": 0.88, "overlap": 1.0}
    p_end = start + 12.0
    data = {
        h: {"report": {"profile": {"posted": posted, "window": [start, p_end - 2.4]}}, "traffic": tr}
        for h, tr in doc["hosts"].items()
    }
    prof = twin_profile(job, data, decision, end=p_end, until=end)
    later = compute_over(job, data, p_end, end)
    assert prof["compute_window"] == "measuring"
    assert prof["compute_s"] == later["compute_s"] == pytest.approx(0.22, abs=0.015)
    assert prof["pause_s"] == later["pause_s"]
    assert prof["comm_bytes"] == posted["comm_bytes"]  # the posted bytes stand
