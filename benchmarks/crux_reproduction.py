"""Reproduce the Crux evaluation (SIGCOMM'24 §6) with the shipped ``crux-*`` scenarios and print tables.

Parts (``--only`` picks a subset, comma-separated; default all):

* ``testbed``: Figs. 19 (2, 3, 4 BERTs) and 20 on the 12-host testbed, ``ecmp-fair`` against
  ``crux-full``: per-job JCT change and GPU utilisation (over the jobs' GPUs) beside the paper's.
* ``fig23``: the synthetic Crux-like trace on the two-layer Clos and on the three-layer double-sided
  fabric (``--fig23`` picks scenarios, e.g. the Clos variants ``crux-fig23-clos-4agg`` with NIC-speed
  uplinks and ``crux-fig23-clos-dense`` with 2-host ToRs) under Sincronia, TACCL*, CASSINI, Crux-PA,
  Crux-PS-PA and Crux-full: average GPU utilisation and Crux-full's gain over each baseline beside the
  paper's bars (reference/crux-spec.md A18).
* ``jobsched``: the fig23 Clos fabric with the ``first-fit`` (the trace's production scheduler, the
  paper's "None"), ``pack``, ``hived`` and ``muri`` job schedulers, each with the ``ecmp-fair`` network
  (no communication scheduling) and with ``crux-full`` (paper Fig. 25); and for every run the share of
  jobs and GPUs at risk of contention (paper Fig. 6).
* ``fairness``: the worst per-job throughput loss under ``crux-full`` on the fig23 Clos run (paper §7.2:
  55.5 %, nobody starved), taken from the ``fig23`` results when they were run.

Run: ``.venv/bin/python benchmarks/crux_reproduction.py [--only testbed,fig23,jobsched] [--workers 2]``
(``--mode fast|exact`` overrides the scenarios' own mode; ``--max-jobs N`` or ``--hours H`` trim the
traces for a quick look; ``--placement NAME`` overrides the fig23 scenarios' job scheduler).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace

from commsched.api.comparing import compare_named as compare
from commsched.io.scenario import Scenario
from commsched.io.shipped import resolve_scenario
from commsched.sim.results.comparison import Comparison, throughput_loss
from commsched.sim.results.records import SimResult

PARTS = ("testbed", "fig23", "jobsched", "fairness")
BASELINES = ("sincronia", "taccl-star", "cassini")
TRACE_POLICIES = (*BASELINES, "crux-pa", "crux-ps-pa", "crux-full")

#: Fig. 23 bars (reference/crux-spec.md §6.7, A18)
_CLOS_BARS = {
    "sincronia": 0.39,
    "taccl-star": 0.49,
    "cassini": 0.48,
    "crux-pa": 0.51,
    "crux-ps-pa": 0.62,
    "crux-full": 0.62,
}
PAPER_FIG23 = {
    "crux-fig23-clos": _CLOS_BARS,
    "crux-fig23-clos-4agg": _CLOS_BARS,  # readings of the same Clos (uplinks, ToR size unknown)
    "crux-fig23-clos-dense": _CLOS_BARS,
    "crux-fig23-double-sided": {
        "sincronia": 0.43,
        "taccl-star": 0.46,
        "cassini": 0.45,
        "crux-pa": 0.48,
        "crux-ps-pa": 0.51,
        "crux-full": 0.50,
    },
}
#: Fig. 25 bars: scheduler -> (without Crux, with Crux); "first-fit" stands for the paper's "None" (the
#: trace's own placement, by the production scheduler); "pack" (best-fit locality packing) has no bar
PAPER_FIG25: dict[str, tuple[float, float] | None] = {
    "first-fit": (0.39, 0.62),
    "pack": None,
    "hived": (0.64, 0.75),
    "muri": (0.59, 0.73),
}
#: Crux Fig. 6: share of jobs, and of their GPUs, at risk of contention in the production trace
PAPER_AT_RISK = (0.363, 0.51)
#: testbed: (utilisation gain, {job prefix: JCT change}) from §6.2 (ranges as text)
PAPER_TESTBED = {
    "crux-fig19-bert2": ("+8.3…12.9 %", {"gpt": "-11…-25 %", "bert": "+0…3 %"}),
    "crux-fig19": ("+8.3…12.9 %", {"gpt": "-11…-25 %", "bert": "+0…3 %"}),
    "crux-fig19-bert4": ("+8.3…12.9 %", {"gpt": "-11…-25 %", "bert": "+0…3 %"}),
    "crux-fig20": ("+13.9 %", {"gpt": "-18 %", "bert": "-15 %", "resnet": "+2 %"}),
}


def _load(name: str, max_jobs: int | None, hours: float | None = None) -> Scenario:
    sc = resolve_scenario(name)
    if max_jobs is not None and len(sc.jobs) > max_jobs:
        sc = replace(sc, jobs=sc.jobs[:max_jobs])
    if hours is not None:
        end = hours * 3600.0
        sc = replace(sc, horizon_s=end, jobs=tuple(j for j in sc.jobs if j.spec.arrival_s < end))
    return sc


def _at_risk(res: SimResult) -> str:
    """Crux Fig. 6's statistic in a run: jobs (and their GPUs) that shared a link with another job."""
    started = [j for j in res.jobs if j.start_s is not None]
    if not started:
        return "no job started"
    risk = [j for j in started if j.shared_links]
    share = len(risk) / len(started)
    gshare = sum(j.gpus for j in risk) / max(1, sum(j.gpus for j in started))
    return (
        f"at risk of contention: {share * 100:.1f} % of jobs, {gshare * 100:.1f} % of their GPUs "
        f"(trace: {PAPER_AT_RISK[0] * 100:.1f} % / {PAPER_AT_RISK[1] * 100:.0f} %)"
    )


def _run(
    sc: Scenario, policies: tuple[str, ...], args: argparse.Namespace, sched: str | None = None
) -> Comparison:
    t0 = time.perf_counter()
    cmp = compare(sc, policies, job_scheduler=sched, mode=args.mode, workers=args.workers)
    what = f"{sc.name}" + (f" --job-scheduler {sched}" if sched else "")
    print(f"  [{what}: {len(policies)} policies, {len(sc.jobs)} jobs, {time.perf_counter() - t0:.1f} s wall]")
    return cmp


def _pct(x: float) -> str:
    return f"{x * 100:+.1f} %" if math.isfinite(x) else "n/a"


def testbed(args: argparse.Namespace) -> None:
    print("\n== Testbed (Figs. 19, 20): crux-full against ecmp-fair ==")
    for name, (paper_util, paper_jct) in PAPER_TESTBED.items():
        sc = _load(name, None)
        cmp = _run(sc, ("ecmp-fair", "crux-full"), args)
        base, crux = cmp.results
        du = crux.allocated_gpu_utilization - base.allocated_gpu_utilization
        print(
            f"{name}: utilisation of the jobs' GPUs {base.allocated_gpu_utilization:.3f} -> "
            f"{crux.allocated_gpu_utilization:.3f} ({du * 100:+.1f} points; paper {paper_util})"
        )
        print(f"  {'job':<9} {'GPUs':>4} {'JCT ecmp s':>11} {'JCT crux s':>11} {'change':>9}  paper")
        for a, b in zip(base.jobs, crux.jobs, strict=True):
            ch = b.jct_s / a.jct_s - 1.0
            kind = next((k for k in paper_jct if str(a.id).startswith(k)), "")
            print(
                f"  {a.id:<9} {a.gpus:>4} {a.jct_s:>11.1f} {b.jct_s:>11.1f} {_pct(ch):>9}  "
                + paper_jct.get(kind, "")
            )


def fig23(args: argparse.Namespace) -> dict[str, Comparison]:
    print("\n== Trace simulation (Fig. 23): average GPU utilisation ==")
    out: dict[str, Comparison] = {}
    wanted = [n.strip() for n in args.fig23.split(",")] if args.fig23 else list(PAPER_FIG23)
    for name in wanted:
        if name not in PAPER_FIG23:
            raise SystemExit(f"--fig23: unknown scenario {name!r}; choose from {', '.join(PAPER_FIG23)}")
        paper = PAPER_FIG23[name]
        sc = _load(name, args.max_jobs, args.hours)
        cmp = _run(sc, TRACE_POLICIES, args, args.placement)
        out[name] = cmp
        util = {s.policy: s.gpu_utilization for s in cmp.summaries}
        print(f"{name}:")
        print(
            f"  {'policy':<11} {'util':>6} {'paper':>6} {'alloc':>6} "
            f"{'avg JCT s':>10} {'done':>9} {'wall s':>7}"
        )
        for s in cmp.summaries:
            print(
                f"  {s.policy:<11} {s.gpu_utilization:>6.3f} {paper[s.policy]:>6.2f} "
                f"{s.allocated_gpu_utilization:>6.3f} {s.avg_jct_s:>10.0f} "
                f"{s.finished_jobs:>4}/{s.jobs:<4} {s.wall_time_s:>7.1f}"
            )
        gains = [util["crux-full"] - util[b] for b in BASELINES]
        pgains = [paper["crux-full"] - paper[b] for b in BASELINES]
        print(
            "  crux-full gain over sincronia/taccl-star/cassini: "
            + " / ".join(f"{g * 100:+.1f}" for g in gains)
            + " points (paper "
            + " / ".join(f"{g * 100:+.0f}" for g in pgains)
            + ")"
        )
        best = max(util[b] for b in BASELINES)
        order = (
            util["crux-full"] >= util["crux-pa"] - 0.005
            and abs(util["crux-full"] - util["crux-ps-pa"]) <= 0.02
            and util["crux-ps-pa"] > util["crux-pa"]
            and util["crux-pa"] > best
        )
        print(
            "  paper's order (full ≈ ps-pa > pa > best baseline): "
            + ("reproduced" if order else "NOT reproduced")
        )
        print("  ecmp-based runs, " + _at_risk(cmp.results[0]))
    return out


def jobsched(args: argparse.Namespace) -> None:
    print("\n== Job schedulers (Fig. 25): utilisation without and with crux-full ==")
    sc = _load("crux-fig25-job-schedulers", args.max_jobs, args.hours)
    rows = {}
    for sched in PAPER_FIG25:
        cmp = _run(sc, ("ecmp-fair", "crux-full"), args, sched)
        rows[sched] = tuple(s.gpu_utilization for s in cmp.summaries)
        print(f"  {sched} with ecmp-fair: " + _at_risk(cmp.results[0]))
    print(f"  {'scheduler':<9} {'alone':>6} {'+crux':>6} {'gain':>7}   paper alone/+crux/gain")
    for sched, (a, b) in rows.items():
        paper = PAPER_FIG25[sched]
        ref = f"{paper[0]:.2f} / {paper[1]:.2f} / {(paper[1] - paper[0]) * 100:+.0f}" if paper else "-"
        print(f"  {sched:<9} {a:>6.3f} {b:>6.3f} {(b - a) * 100:>+6.1f}   {ref}")
    none = PAPER_FIG25["first-fit"]
    assert none is not None
    for base in ("first-fit", "pack"):
        for sched in ("hived", "muri"):
            paper = PAPER_FIG25[sched]
            ref = (
                f" (paper {(paper[0] - none[0]) * 100:+.0f} over None)"
                if base == "first-fit" and paper
                else ""
            )
            print(
                f"  {sched} alone vs {base} alone: {(rows[sched][0] - rows[base][0]) * 100:+.1f} points{ref}"
            )


def fairness(args: argparse.Namespace, runs: dict[str, Comparison] | None) -> None:
    print("\n== Fairness (§7.2): per-job throughput loss under crux-full ==")
    if runs is None:
        sc = _load("crux-fig23-clos", args.max_jobs, args.hours)
        runs = {sc.name: _run(sc, ("crux-full",), args, args.placement)}
    for name, cmp in runs.items():
        res = next(r for r in cmp.results if r.policy == "crux-full")
        losses = sorted(throughput_loss(res))
        started = [j for j in res.jobs if j.start_s is not None]
        starved = [j for j in started if j.iterations <= 0]
        worst = losses[-1] if losses else float("nan")
        p95 = losses[int(0.95 * (len(losses) - 1))] if losses else float("nan")
        print(
            f"{name}: worst loss {worst * 100:.1f} % (paper 55.5 %), 95th percentile {p95 * 100:.1f} %, "
            f"{len(starved)} of {len(started)} started jobs without a finished iteration"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(PARTS), help="comma-separated subset of " + ", ".join(PARTS))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--mode", choices=("fast", "exact"), default=None)
    ap.add_argument("--max-jobs", type=int, default=None, help="keep the first N trace jobs")
    ap.add_argument(
        "--hours", type=float, default=None, help="simulate the first H hours only (jobs arriving in them)"
    )
    ap.add_argument(
        "--fig23",
        default="crux-fig23-clos,crux-fig23-double-sided",
        help="fig23: comma-separated scenarios (also crux-fig23-clos-4agg, crux-fig23-clos-dense)",
    )
    ap.add_argument(
        "--placement", default=None, help="fig23: override the scenarios' job scheduler (e.g. first-fit)"
    )
    args = ap.parse_args()
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    bad = [p for p in parts if p not in PARTS]
    if bad:
        ap.error(f"unknown part(s) {', '.join(bad)}; choose from {', '.join(PARTS)}")
    t0 = time.perf_counter()
    runs = None
    if "testbed" in parts:
        testbed(args)
    if "fig23" in parts:
        runs = fig23(args)
    if "jobsched" in parts:
        jobsched(args)
    if "fairness" in parts:
        fairness(args, runs)
    print(f"\ntotal wall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
