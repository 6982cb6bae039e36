"""Golden results of crowded components: the fast mode's measured jumps and the analytic fluid, pinned.

The shipped scenarios' golden cases (``test_golden.py``) never reach a crowded component in fast mode.
These run one case of :func:`commsched.testing.crowded.crowded_case` (14 jobs on 2.5:1 oversubscribed
uplinks, 2 classes) in exact mode, in fast mode (its measured jumps and catch-ups) and in fast mode with
the analytic fluid on (``fluid_min_jobs`` 10, so that its steady states, classes and latencies enter
the result), and compare every field with the stored files byte for byte, as ``test_golden.py`` does.
Each stored file carries a digest of the case (fabric, jobs, classes), so that a changed generator is
told apart from a changed engine. Regenerate with ``COMMSCHED_REGEN_GOLDEN=1``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from commsched.scheduling.policies import communication_policies
from commsched.sim.results.records import Mode
from commsched.testing.crowded import CrowdedCase, crowded_case, run_case

from .golden_compare import check
from .test_golden import GOLDEN, REGEN, _text_digest, jobs_csv, summary_of


@dataclass(frozen=True, slots=True, kw_only=True)
class CrowdedGolden:
    seed: int
    policy: str
    mode: Mode
    horizon_s: float
    fluid_min_jobs: int | None = None

    @property
    def name(self) -> str:
        fluid = "" if self.fluid_min_jobs is None else f"-fluid{self.fluid_min_jobs}"
        return f"crowded-{self.seed}--{self.policy}-h{self.horizon_s:g}-{self.mode}{fluid}"


CASES = (
    CrowdedGolden(seed=3, policy="static", mode=Mode.EXACT, horizon_s=60.0),
    CrowdedGolden(seed=3, policy="static", mode=Mode.FAST, horizon_s=60.0),
    CrowdedGolden(seed=3, policy="crux-full", mode=Mode.FAST, horizon_s=60.0),
    CrowdedGolden(seed=3, policy="crux-full", mode=Mode.FAST, horizon_s=60.0, fluid_min_jobs=10),
)


def _case_digest(case: CrowdedCase) -> str:
    jobs = [
        (str(j.spec.id), repr(j.spec.profile.compute_s), repr(j.spec.profile.sync_bytes), j.spec.priority,
         j.spec.iterations, repr(j.spec.arrival_s), list(j.gpus))
        for j in case.jobs
    ]  # fmt: skip
    text = json.dumps(
        {"oversubscription": repr(case.oversubscription), "levels": case.priority_levels, "jobs": jobs}
    )
    return _text_digest(text)


@pytest.mark.parametrize("golden", CASES, ids=[c.name for c in CASES])
def test_golden_crowded(golden: CrowdedGolden) -> None:
    case = crowded_case(golden.seed, horizon_s=golden.horizon_s)
    policy = communication_policies()[golden.policy]
    result, sim = run_case(case, policy, golden.mode, fluid_min_jobs=golden.fluid_min_jobs)
    if golden.fluid_min_jobs is not None:
        assert sim.fluid_solves > 0  # the case does enter the fluid
    else:
        assert sim.fluid_solves == 0
    if golden.mode is Mode.FAST and golden.policy == "static" and not REGEN:
        # the fast mode does extrapolate this case: fewer events than the exact run stored beside it (each
        # stretch is checked by the detail after it, so less than a third fewer on this 60-s horizon)
        exact = json.loads((GOLDEN / f"{CASES[0].name}.json").read_text(encoding="utf-8"))
        assert result.events < 0.8 * exact["events"]
        assert result.extrapolated_job_fraction > 0.25
    summary = {"case_sha256": _case_digest(case), **summary_of(result)}
    text = json.dumps(summary, indent=1, sort_keys=False) + "\n"
    table = jobs_csv(summary)
    jpath, cpath = GOLDEN / f"{golden.name}.json", GOLDEN / f"{golden.name}.jobs.csv"
    if REGEN:
        jpath.write_text(text, encoding="utf-8")
        cpath.write_text(table, encoding="utf-8")
    stored = jpath.read_text(encoding="utf-8")
    if json.loads(stored).get("case_sha256") != summary["case_sha256"]:
        pytest.fail(f"the crowded case of {jpath.name} changed: check the generator, then regenerate")
    check(stored, text, name=jpath.name, fast=golden.mode is Mode.FAST)
    if stored == text:
        assert cpath.read_text(encoding="utf-8") == table, f"{cpath.name} differs"
