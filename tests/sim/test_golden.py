"""Golden results: every shipped scenario, under the main policies, gives the stored results byte for byte.

The stored files under ``tests/sim/golden/`` were produced by the engine as it stood before it was split
into modules; a refactoring of the simulator must leave them unchanged. Each case keeps the scenario's own
fabric, jobs and choices and shortens only the horizon where the full run would take more than a few
seconds (the trace scenarios cover a day or months).

Every field of the result is compared: the summary figures and per-job results exactly (floats in their
shortest round-trip form), the time series and per-link byte counters through a SHA-256 of their raw
bytes; each stored file carries a digest of its scenario's text, so that a changed scenario is reported
as such. To regenerate after an intended change of behaviour or of a scenario::

    COMMSCHED_REGEN_GOLDEN=1 pytest tests/sim/test_golden.py
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from commsched.api.runner import simulate_scenario
from commsched.io.shipped import resolve_scenario, shipped_names, shipped_text
from commsched.sim.results.records import SimResult

from .golden_compare import check

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("COMMSCHED_REGEN_GOLDEN") == "1"

#: the communication policies of the Crux comparison (and the CASSINI time shifts, which delay iterations)
CRUX_POLICIES = ("ecmp-fair", "crux-full", "sincronia", "cassini", "taccl-star")


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    scenario: str
    policy: str
    horizon_s: float | None = None  # None: the scenario's own
    mode: str | None = None  # None: the scenario's own
    slow: bool = False

    @property
    def name(self) -> str:
        h = "" if self.horizon_s is None else f"-h{self.horizon_s:g}"
        m = "" if self.mode is None else f"-{self.mode}"
        return f"{self.scenario}--{self.policy}{h}{m}"


def _cases() -> list[Case]:
    out: list[Case] = []
    # the testbed scenarios: a handful of jobs on 96 GPUs, exact and fast, each run to its end
    for sc in ("crux-fig19", "crux-fig19-bert2", "crux-fig19-bert4", "crux-fig20"):
        for pol in ("ecmp-fair", "crux-full"):
            out.append(Case(scenario=sc, policy=pol, horizon_s=60.0))
        out.append(Case(scenario=sc, policy="crux-full", mode="fast", slow=sc != "crux-fig19"))
    out += [Case(scenario="crux-fig19", policy=p, horizon_s=60.0) for p in ("sincronia", "cassini")]
    out.append(Case(scenario="crux-fig19", policy="ecmp-fair"))  # exact, to the end of every job
    # the trace scenarios: the first part of the day (arrivals, queueing, departures, jumps)
    out += [Case(scenario="demo", policy=p, horizon_s=1800.0) for p in CRUX_POLICIES]
    for sc in ("crux-fig23-clos", "crux-fig23-clos-4agg", "crux-fig23-clos-dense", "crux-fig23-double-sided"):
        for pol in ("ecmp-fair", "crux-full"):
            out.append(Case(scenario=sc, policy=pol, horizon_s=900.0, slow=True))
    out.append(Case(scenario="crux-fig25-job-schedulers", policy="crux-full", horizon_s=900.0, slow=True))
    # the Crux mixes with H200-era profiles (docs/byo-job.md) and their pair with the zoo's shipped ones
    out += [Case(scenario="crux-fig19-h200", policy=p, horizon_s=60.0) for p in ("ecmp-fair", "crux-full")]
    for sc in ("crux-fig23-4h-zoo", "crux-fig23-4h-h200"):
        out += [Case(scenario=sc, policy=p, horizon_s=900.0, slow=True) for p in ("ecmp-fair", "crux-full")]
    for pol in ("vclos", "ecmp", "ocs-vclos"):
        out.append(Case(scenario="vclos-table5-512", policy=pol, horizon_s=10_000.0))
        out.append(Case(scenario="vclos-2048", policy=pol, horizon_s=2_000.0, slow=True))
    out += [Case(scenario="vclos-testbed", policy=p) for p in ("vclos", "ecmp")]
    out += [Case(scenario="vclos-testbed-policy", policy=p) for p in ("vclos", "ecmp")]
    out += [Case(scenario="vclos-testbed-ocs", policy=p) for p in ("ocs-vclos", "ecmp")]
    out += [
        Case(scenario="vclos-table5-512-comm", policy=p, horizon_s=10_000.0, slow=True)
        for p in ("vclos", "ecmp")
    ]
    out += [Case(scenario="llm-h200", policy=p) for p in ("ecmp-fair", "crux-full")]  # grouped LLM jobs
    return out


CASES = _cases()


def test_every_shipped_scenario_has_a_case() -> None:
    assert {c.scenario for c in CASES} == set(shipped_names())


def _digest(a: Any) -> str:
    arr = np.ascontiguousarray(np.asarray(a))
    return f"{arr.dtype.str}{arr.shape}:" + hashlib.sha256(arr.tobytes()).hexdigest()


def _jsonable(x: Any) -> Any:
    """Floats as their shortest round-trip text (``repr``); non-finite ones spelled out."""
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def summary_of(result: SimResult) -> dict[str, Any]:
    """Every deterministic field of a result (``wall_time_s`` left out)."""
    jobs = [
        {
            "id": j.id,
            "gpus": j.gpus,
            "arrival_s": _jsonable(j.arrival_s),
            "start_s": _jsonable(j.start_s),
            "end_s": _jsonable(j.end_s),
            "iterations": _jsonable(j.iterations),
            "target_iterations": _jsonable(j.target_iterations),
            "standalone_iteration_s": _jsonable(j.standalone_iteration_s),
            "mean_iteration_s": _jsonable(j.mean_iteration_s),
            "busy_gpu_s": _jsonable(j.busy_gpu_s),
            "finished": j.finished,
            "priority_class": j.priority_class,
            "intensity": _jsonable(j.intensity),
            "shared_links": j.shared_links,
            "placement": list(j.placement),
        }
        for j in result.jobs
    ]
    s = result.series
    return {
        "policy": result.policy,
        "mode": str(result.mode),
        "seed": result.seed,
        "cluster_gpus": result.cluster_gpus,
        "sim_time_s": _jsonable(result.sim_time_s),
        "window_s": _jsonable(result.window_s),
        "gpu_utilization": _jsonable(result.gpu_utilization),
        "allocated_gpu_utilization": _jsonable(result.allocated_gpu_utilization),
        "busy_gpu_s": _jsonable(result.busy_gpu_s),
        "events": result.events,
        "link_bytes": _digest(result.link_bytes),
        "link_intensity_bytes": _digest(result.link_intensity_bytes),
        "series": {
            "t": _digest(s.t),
            "gpu_utilization": _digest(s.gpu_utilization),
            "allocated_gpu_utilization": _digest(s.allocated_gpu_utilization),
            "link_ids": _digest(s.link_ids),
            "link_utilization": _digest(s.link_utilization),
            "link_intensity": _digest(s.link_intensity),
        },
        # every job through a digest; listed in full: the jobs that arrived within the run
        "jobs_digest": _text_digest(json.dumps(jobs, sort_keys=True)),
        "jobs": [j for j in jobs if j["start_s"] is not None],
    }


def _text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def jobs_csv(summary: dict[str, Any]) -> str:
    buf = io.StringIO()
    rows = summary["jobs"]
    fields = [k for k in rows[0] if k != "placement"] if rows else ["id"]
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow(row)
    return buf.getvalue()


def _params() -> list[Any]:
    return [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.slow else []) for c in CASES]


@pytest.mark.parametrize("case", _params())
def test_golden(case: Case) -> None:
    scenario = resolve_scenario(case.scenario)
    if case.horizon_s is not None:
        scenario = replace(scenario, horizon_s=case.horizon_s)
    result = simulate_scenario(scenario, policy=case.policy, mode=case.mode)
    # the scenario's own text first: a changed scenario is told apart from a changed engine
    summary = {"scenario_sha256": _text_digest(shipped_text(case.scenario)), **summary_of(result)}
    text = json.dumps(summary, indent=1, sort_keys=False) + "\n"
    table = jobs_csv(summary)
    jpath, cpath = GOLDEN / f"{case.name}.json", GOLDEN / f"{case.name}.jobs.csv"
    if REGEN:
        GOLDEN.mkdir(exist_ok=True)
        jpath.write_text(text, encoding="utf-8")
        cpath.write_text(table, encoding="utf-8")
    stored = jpath.read_text(encoding="utf-8")
    if json.loads(stored).get("scenario_sha256") != summary["scenario_sha256"]:
        pytest.fail(
            f"scenario {case.scenario} changed since {jpath.name} was stored: check the change, then "
            "regenerate with COMMSCHED_REGEN_GOLDEN=1"
        )
    # byte for byte where the engine reproduces it, else figure by figure (golden_compare)
    check(stored, text, name=jpath.name, fast=summary["mode"] == "fast")
    if stored == text:
        assert cpath.read_text(encoding="utf-8") == table, f"{cpath.name} differs"
