"""The fast mode against the exact mode on crowded, oversubscribed, multi-class components (seeds 0-199).

Each seed draws a case with :func:`commsched.testing.crowded.crowded_case` (10-30 jobs on a few hosts of a
small two-layer Clos whose uplinks are oversubscribed 2:1 to 8:1, 2-4 priority classes, compute from
0.02 s to 1 s) and runs it, under each policy, in exact mode, in exact mode with every arrival jittered
by up to 1 ms, twice (the exact mode's own reproducibility: jobs whose result moves by more than 1 %
under it are *chaotic* and left out of the per-job bounds, and counted) and in fast mode. Every other
job that completes at least one iteration in the exact run is held to the per-job bounds, slowed and
starved jobs included; one that completes none in fast mode counts as an error of 1.0. Per policy it
prints the worst case of each figure (utilisation of the allocated GPUs, per-job mean iteration time at
the 90th percentile and at worst), the bounds the fast mode is held to, how many cases hold them, and
the cost: events and CPU seconds of the fast mode against the exact one (the exact runs are the
reference measured in the same run).

Run: ``.venv/bin/python benchmarks/fast_vs_exact_crowded.py [--seeds 0-199] [--policies static,crux-full,
ecmp-fair] [--horizon-s 120] [--workers 2] [--fluid-min-jobs N] [--json] [--cases-out FILE]``.
``--cases-out FILE`` writes one JSON line per case (``seed``, ``policy``, ``util_diff``,
``cluster_util_diff``, the per-job lists ``iter_errors``, ``iter_noise`` and ``iter_slowdown``, and the
case's verdict and cost). ``--fluid-min-jobs N`` runs the fast mode with the analytic fluid on
components of ``N`` jobs or more (off by default): it shows how far outside the bounds that
approximation is. Exit status 1 when a case breaks a bound.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass

from commsched.scheduling.policies import communication_policies
from commsched.sim.results.records import Mode
from commsched.testing.crowded import (
    ITER_MAX_BOUND,
    ITER_NOISE,
    ITER_P90_BOUND,
    UTIL_BOUND,
    Agreement,
    compare,
    crowded_case,
    jittered,
    run_case,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """One case under one policy: the agreement and the CPU seconds of each run."""

    agreement: Agreement
    jobs: int
    exact_cpu_s: float
    fast_cpu_s: float
    #: the fast run's own account: share of the job-time extrapolated, its checks and their worst
    extrapolated_job_fraction: float
    fast_checks: int
    fast_checks_failed: int
    worst_check_disagreement: float


def _one(task: tuple[int, str, float, int | None]) -> Outcome:
    seed, policy, horizon_s, fluid_min_jobs = task
    case = crowded_case(seed, horizon_s=horizon_s)
    fn = communication_policies()[policy]
    c0 = time.process_time()
    exact, _ = run_case(case, fn, Mode.EXACT)
    c1 = time.process_time()
    twins = tuple(run_case(jittered(case, k), fn, Mode.EXACT)[0] for k in (1, 2))
    c2 = time.process_time()
    fast, _ = run_case(case, fn, Mode.FAST, fluid_min_jobs=fluid_min_jobs)
    c3 = time.process_time()
    return Outcome(
        agreement=compare(case, fast=fast, exact=exact, twins=twins, policy_name=policy),
        jobs=len(case.jobs),
        exact_cpu_s=c1 - c0,
        fast_cpu_s=c3 - c2,
        extrapolated_job_fraction=fast.extrapolated_job_fraction,
        fast_checks=fast.fast_checks,
        fast_checks_failed=fast.fast_checks_failed,
        worst_check_disagreement=fast.worst_check_disagreement,
    )


def _seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySummary:
    """The worst case of each figure over the cases of one policy, and the cost."""

    policy: str
    cases: int
    hold: int
    worst_util_diff: float
    worst_util_seed: int
    worst_cluster_util_diff: float
    worst_iter_p90: float
    worst_iter_p90_seed: int
    worst_iter_max: float
    worst_iter_max_seed: int
    jobs_compared: int
    jobs_chaotic: int
    extrapolated_job_fraction: float
    worst_check_disagreement: float
    events_fast_over_exact: float
    cpu_fast_s: float
    cpu_exact_s: float
    failing_seeds: tuple[int, ...]


def summary(policy: str, outs: list[Outcome]) -> PolicySummary:
    ags = [o.agreement for o in outs]
    util = max(ags, key=lambda a: abs(a.util_diff))
    p90 = max(ags, key=lambda a: a.iter_p90)
    worst = max(ags, key=lambda a: a.iter_max)
    return PolicySummary(
        policy=policy,
        cases=len(ags),
        hold=sum(a.holds for a in ags),
        worst_util_diff=util.util_diff,
        worst_util_seed=util.seed,
        worst_cluster_util_diff=max(abs(a.cluster_util_diff) for a in ags),
        worst_iter_p90=p90.iter_p90,
        worst_iter_p90_seed=p90.seed,
        worst_iter_max=worst.iter_max,
        worst_iter_max_seed=worst.seed,
        jobs_compared=sum(len(a.steady_errors) for a in ags),
        jobs_chaotic=sum(a.chaotic for a in ags),
        extrapolated_job_fraction=float(sum(o.extrapolated_job_fraction for o in outs) / max(1, len(outs))),
        worst_check_disagreement=max((o.worst_check_disagreement for o in outs), default=0.0),
        events_fast_over_exact=sum(a.fast_events for a in ags) / max(1, sum(a.exact_events for a in ags)),
        cpu_fast_s=sum(o.fast_cpu_s for o in outs),
        cpu_exact_s=sum(o.exact_cpu_s for o in outs),
        failing_seeds=tuple(a.seed for a in ags if not a.holds),
    )


def _print(s: PolicySummary) -> None:
    print(
        f"{s.policy}: {s.hold}/{s.cases} cases within the bounds; worst utilisation diff "
        f"{s.worst_util_diff:+.4f} (seed {s.worst_util_seed}; over the whole cluster "
        f"{s.worst_cluster_util_diff:.4f}), per-job p90 {s.worst_iter_p90:.2%} "
        f"(seed {s.worst_iter_p90_seed}), max {s.worst_iter_max:.2%} (seed {s.worst_iter_max_seed})"
    )
    print(
        f"  {s.jobs_compared} jobs compared, {s.jobs_chaotic} chaotic left out; on average "
        f"{s.extrapolated_job_fraction:.0%} of the job-time extrapolated, worst check disagreement "
        f"{s.worst_check_disagreement:.2%}; fast/exact events "
        f"{s.events_fast_over_exact:.2f}, CPU {s.cpu_fast_s:.0f} s / {s.cpu_exact_s:.0f} s = "
        f"{s.cpu_fast_s / max(s.cpu_exact_s, 1e-9):.2f}"
        + (f"; failing seeds {list(s.failing_seeds)}" if s.failing_seeds else "")
    )


def _write_case(path: str, o: Outcome, *, first: bool) -> None:
    """One JSON line per case: its agreement, its figures and the CPU seconds of its runs."""
    a = o.agreement
    row = {**asdict(a), **{k: v for k, v in asdict(o).items() if k != "agreement"}}
    row |= {"holds": a.holds, "iter_p90": a.iter_p90, "iter_max": a.iter_max, "chaotic_max": a.chaotic_max}
    with open(path, "w" if first else "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0-199", help="seeds, e.g. 0-199 or 0-4,10")
    ap.add_argument("--policies", default="static,crux-full,ecmp-fair")
    ap.add_argument("--horizon-s", type=float, default=120.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fluid-min-jobs", type=int, default=None, help="run the analytic fluid (default: off)")
    ap.add_argument("--json", action="store_true", help="print one JSON object per policy")
    ap.add_argument("--cases-out", default=None, help="also write every case's figures here (JSON lines)")
    args = ap.parse_args()
    policies = args.policies.split(",")
    tasks = [(s, p, args.horizon_s, args.fluid_min_jobs) for p in policies for s in _seeds(args.seeds)]
    t0 = time.perf_counter()
    outs: list[Outcome] = []
    with ProcessPoolExecutor(max(1, args.workers)) as ex:
        for o in ex.map(_one, tasks):  # in order, each case as soon as it and those before it are done
            outs.append(o)
            if args.cases_out:
                _write_case(args.cases_out, o, first=len(outs) == 1)
    ok = True
    if not args.json:
        print(
            f"bounds: utilisation of the allocated GPUs within {UTIL_BOUND}, per-job mean iteration time "
            f"within {ITER_P90_BOUND:.0%} at p90 and {ITER_MAX_BOUND:.0%} at worst (jobs whose exact result "
            f"moves by more than {ITER_NOISE:.0%} under a 1 ms jitter left out, slowed ones included); "
            f"horizon {args.horizon_s:g} s"
            + (f"; analytic fluid from {args.fluid_min_jobs} jobs" if args.fluid_min_jobs else "")
        )
    for p in policies:
        s = summary(p, [o for o, t in zip(outs, tasks, strict=True) if t[1] == p])
        ok = ok and not s.failing_seeds
        if args.json:
            print(json.dumps(asdict(s)))
        else:
            _print(s)
    if not args.json:
        print(
            f"{len(tasks)} cases in {time.perf_counter() - t0:.0f} s wall; "
            f"{sum(o.agreement.chaotic for o in outs)} chaotic jobs left out"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
