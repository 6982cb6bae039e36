"""Exact-mode results of the crowded cases, seeds 0-19 under crux-full and ecmp-fair, pinned per job.

:func:`commsched.testing.crowded.crowded_case` draws crowded, oversubscribed, multi-class components
(10-30 jobs); the stored files ``crowded-{seed}--{policy}-h120-exact.json`` hold the exact mode's result of
each (horizon 120 s) as the engine produced it before its event loop was made lazy: every field of the
result (``test_golden.summary_of``), and, per job, how far its mean iteration time moves when every arrival
is delayed by up to 1 ms (:func:`commsched.testing.crowded.jittered`, two draws): its *noise*.

The engine must reproduce every job's iterations and mean iteration time within 1e-9 relative, except the
jobs that are *chaotic* (noise above :data:`commsched.testing.crowded.ITER_NOISE`, 1 %): a perturbation
of a few ulps of one event time moves them as much as a 1 ms jitter does, so no engine that orders its
floating-point sums differently can be held to their figures. The utilisation of the allocated GPUs and
of the cluster is held to 1e-9 relative on the cases without a chaotic job, and to the utilisation's own
jitter noise (plus 1e-9) on the others. Seeds 0-4 run in the default suite, the others under ``slow``.
Regenerate (only on an intended change of the model, never of the engine's speed) with
``COMMSCHED_REGEN_GOLDEN=1``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from commsched.scheduling.policies import communication_policies
from commsched.sim.results.records import Mode, SimResult
from commsched.testing.crowded import ITER_NOISE, crowded_case, jittered, run_case

from .test_golden import GOLDEN, REGEN, summary_of
from .test_golden_crowded import _case_digest

POLICIES = ("crux-full", "ecmp-fair")
SEEDS = range(20)
#: seeds run in the default suite (all of them run under the ``slow`` marker)
QUICK_SEEDS = range(5)
HORIZON_S = 120.0
RTOL = 1e-9


def _name(seed: int, policy: str) -> str:
    return f"crowded-{seed}--{policy}-h{HORIZON_S:g}-exact"


def _rel(a: float, b: float) -> float:
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(b), 1e-300)


def _noise(exact: SimResult, twins: list[SimResult]) -> tuple[list[float], float, float]:
    """Per job: the largest relative move of its mean iteration time in a twin (inf: it completes no
    iteration in one of them but does in another); the largest move of both utilisations."""
    out = []
    for k, e in enumerate(exact.jobs):
        others = [t.jobs[k] for t in twins]
        its = [e.iterations, *(o.iterations for o in others)]
        if min(its) < 1:
            out.append(0.0 if max(its) < 1 else math.inf)
            continue
        out.append(max(_rel(o.mean_iteration_s, e.mean_iteration_s) for o in others))
    alloc = max(abs(t.allocated_gpu_utilization - exact.allocated_gpu_utilization) for t in twins)
    cluster = max(abs(t.gpu_utilization - exact.gpu_utilization) for t in twins)
    return out, alloc, cluster


def _regenerate(seed: int, policy: str) -> None:
    case = crowded_case(seed, horizon_s=HORIZON_S)
    fn = communication_policies()[policy]
    exact, _ = run_case(case, fn, Mode.EXACT)
    twins = [run_case(jittered(case, k), fn, Mode.EXACT)[0] for k in (1, 2)]
    noise, alloc_noise, cluster_noise = _noise(exact, twins)
    summary: dict[str, Any] = {"case_sha256": _case_digest(case), **summary_of(exact)}
    summary["noise"] = {
        "jobs": {j.id: repr(n) for j, n in zip(exact.jobs, noise, strict=True)},
        "allocated_gpu_utilization": repr(alloc_noise),
        "gpu_utilization": repr(cluster_noise),
    }
    path = GOLDEN / f"{_name(seed, policy)}.json"
    path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


def _params() -> list[Any]:
    return [
        pytest.param(s, p, id=_name(s, p), marks=[] if s in QUICK_SEEDS else [pytest.mark.slow])
        for s in SEEDS
        for p in POLICIES
    ]


@pytest.mark.parametrize(("seed", "policy"), _params())
def test_exact_mode_reproduces_the_crowded_goldens(seed: int, policy: str) -> None:
    if REGEN:
        _regenerate(seed, policy)
    stored = json.loads((GOLDEN / f"{_name(seed, policy)}.json").read_text(encoding="utf-8"))
    case = crowded_case(seed, horizon_s=HORIZON_S)
    assert stored["case_sha256"] == _case_digest(case), "the crowded generator changed"
    result, _ = run_case(case, communication_policies()[policy], Mode.EXACT)
    noise = {k: float(v) for k, v in stored["noise"].items() if k != "jobs"}
    job_noise = {k: float(v) for k, v in stored["noise"]["jobs"].items()}
    chaotic = {k for k, v in job_noise.items() if v > ITER_NOISE}
    by_id = {j.id: j for j in result.jobs}
    wrong = []
    for row in stored["jobs"]:
        j = by_id[row["id"]]
        if j.id in chaotic:
            continue
        for field in ("iterations", "mean_iteration_s"):
            want, got = float(row[field]), float(getattr(j, field))
            if _rel(got, want) > RTOL:
                wrong.append(f"{j.id}.{field}: {got!r} != {want!r} (noise {job_noise[j.id]:.2e})")
    for field in ("allocated_gpu_utilization", "gpu_utilization"):
        want, got = float(stored[field]), float(getattr(result, field))
        bound = RTOL * abs(want) + (noise[field] if chaotic else 0.0)
        if abs(got - want) > bound:
            wrong.append(f"{field}: {got!r} != {want!r} (bound {bound:.2e})")
    assert not wrong, "; ".join(wrong)
    # every job the stored run started is started again, and no other
    assert {j.id for j in result.jobs if j.start_s is not None} == {r["id"] for r in stored["jobs"]}
