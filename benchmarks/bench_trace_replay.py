"""Time crux-full replaying a Crux-scale trace (5,000 jobs, 14 days, 2,048 GPUs) in fast mode.

The fabric and calibration are those of the shipped ``crux-fig23-clos`` scenario (64 ToR x 16 Agg
two-layer Clos, 4:1 uplinks, compute 2x and bytes 10x the zoo's), placed by ``pack`` unless ``--placement``
says otherwise; only the trace is stretched to the paper's full two weeks (reference/crux-spec.md §6.5:
5,000+ jobs, two weeks, 2,000+ GPUs). Prints the wall time (and the process CPU time, the fairer figure
on a shared machine), its ratio to the 300 s budget (two cores), and its ratio to RapidNetSim's
published cost (358 CPU-s per 1,000 jobs on 1,024 GPUs with link contention switched off, ``DESIGN.md``;
scaled linearly to the job count).

``--agreement`` instead replays the jobs that arrive in the first ``--window-h`` hours (default 6) of
the same trace in fast and in exact mode and prints the difference in GPU utilisation and the per-job
JCT differences (jobs finished in both runs), and whether they are within the bounds the fast mode is
held to (utilisation within 0.5 points, JCT within 2 % at p95; ``docs/simulator.md``).

With a placement other than ``pack`` the same run also replays ``pack`` and prints the ratio of the two
(``--no-pack-reference`` skips it). ``--json`` prints one object instead: ``wall_s``, ``cpu_s``,
``gpu_utilization``, ``jobs_finished``, ``ratio_to_budget`` (and ``_cpu``), ``ratio_to_rapidnetsim`` and,
with the pack reference, ``pack_wall_s``, ``pack_cpu_s``, ``ratio_to_pack`` (and ``_cpu``).

``--gpus N`` replays the production-scale shape instead (issue "fast and right at production scale"):
the first ``--days`` days of the 14-day trace of ``40,000 x N / 16,384`` jobs on ``N / 32`` ToRs x 16 Aggs
(4 hosts of 8 GPUs per ToR, 4:1 uplinks, 100/25 Gb/s: ``crux-fig23-clos``'s shape), first-fit with
backfill, fast mode. The replay runs in a process of its own; ``cpu_s`` (user + system) and
``peak_rss_mb`` (MiB) are that process's, children included. ``--json`` prints one object with
``gpus``, ``days``, ``policy``, ``placement``, ``jobs``, ``jobs_finished``, ``events``, ``cpu_s``,
``wall_s``, ``peak_rss_mb``, ``gpu_utilization``, ``largest_component`` (the most jobs sharing links at
once) and ``largest_domain`` (the most jobs that could share a link, which a decision costs).
``--series 2048,4096,8192,16384`` runs each size in turn and prints the cost exponent: the slope of
log CPU-s against log GPUs (least squares), and each size's CPU-s over the smallest's.

Run: ``.venv/bin/python benchmarks/bench_trace_replay.py [--jobs 5000] [--days 14] [--policy crux-full]
[--placement pack] [--json]``,
``.venv/bin/python benchmarks/bench_trace_replay.py --agreement [--window-h 6]``,
``.venv/bin/python benchmarks/bench_trace_replay.py --gpus 16384 --days 2 [--json]`` or
``.venv/bin/python benchmarks/bench_trace_replay.py --series 2048,4096,8192,16384 --days 2``
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

import numpy as np

from commsched.api.runner import simulate_scenario
from commsched.io import yamlio
from commsched.io.scenario import Scenario, scenario_from_data
from commsched.io.shipped import shipped_text

BUDGET_S = 300.0
RAPIDNETSIM_S_PER_JOB = 358.0 / 1000.0
DAY_S = 86_400.0
#: fast against exact (issue 16): GPU utilisation within 0.5 points, per-job JCT within 2 % at p95
UTIL_BOUND = 0.005
JCT_P95_BOUND = 0.02


def _shipped_data(name: str) -> dict[str, Any]:
    data = yamlio.load(shipped_text(name))
    assert isinstance(data, dict)  # a shipped scenario is a mapping
    return data


def trace_scenario(
    jobs: int, days: float, seed: int, placement: str = "pack", fluid_min_jobs: int | None = None
) -> Scenario:
    """``crux-fig23-clos`` with its trace stretched to ``jobs`` over ``days``, placed by ``placement``
    (``fluid_min_jobs``: the scenario key of that name, when given)."""
    data = _shipped_data("crux-fig23-clos")
    if fluid_min_jobs is not None:
        data["fluid_min_jobs"] = fluid_min_jobs
    data["trace"] = {**data["trace"], "jobs": jobs, "days": days, "seed": seed}
    data["placement"] = placement
    data["horizon_s"] = days * DAY_S
    data["name"] = f"crux-trace-{jobs}-{days:g}d"
    return scenario_from_data(data, source="bench_trace_replay")


def _replay(args: argparse.Namespace, placement: str) -> dict[str, float | int]:
    """One fast-mode replay: wall and CPU seconds, GPU utilisation, jobs finished, events."""
    sc = trace_scenario(args.jobs, args.days, args.seed, placement, args.fluid_min_jobs)
    c0 = time.process_time()
    res = simulate_scenario(sc, policy=args.policy, mode="fast")
    cpu_s = time.process_time() - c0
    return {
        "wall_s": round(res.wall_time_s, 3),
        "cpu_s": round(cpu_s, 3),
        "gpu_utilization": res.gpu_utilization,
        "jobs_finished": sum(j.finished for j in res.jobs),
        "jobs": len(sc.jobs),
        "gpus": sc.topology.n_gpus,
        "events": res.events,
    }


def bench(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    trace_scenario(args.jobs, args.days, args.seed, args.placement)
    t_load = time.perf_counter() - t0
    run = _replay(args, args.placement)
    ref = RAPIDNETSIM_S_PER_JOB * float(run["jobs"])
    out: dict[str, object] = {
        "policy": args.policy,
        "placement": args.placement,
        "days": args.days,
        **run,
        "budget_s": BUDGET_S,
        "ratio_to_budget": run["wall_s"] / BUDGET_S,
        "ratio_to_budget_cpu": run["cpu_s"] / BUDGET_S,
        "ratio_to_rapidnetsim": run["wall_s"] / ref,
    }
    pack = None
    if args.placement != "pack" and not args.no_pack_reference:
        pack = _replay(args, "pack")
        out |= {
            "pack_wall_s": pack["wall_s"],
            "pack_cpu_s": pack["cpu_s"],
            "pack_gpu_utilization": pack["gpu_utilization"],
            "ratio_to_pack": run["wall_s"] / pack["wall_s"],
            "ratio_to_pack_cpu": run["cpu_s"] / pack["cpu_s"],
        }
    if args.json:
        print(json.dumps(out))
        return
    print(f"scenario build (topology + trace): {t_load:.2f} s")
    print(
        f"{args.policy} fast, {args.placement}, on {run['gpus']} GPUs, {run['jobs']} jobs, "
        f"{args.days:g} days: "
        f"{run['wall_s']:.1f} s wall ({run['cpu_s']:.1f} CPU-s), GPU utilisation "
        f"{run['gpu_utilization']:.3f}, {run['jobs_finished']} finished, {run['events']} events"
    )
    print(
        f"ratio to the {BUDGET_S:.0f} s budget: {out['ratio_to_budget']:.2f} "
        f"(CPU: {out['ratio_to_budget_cpu']:.2f})"
    )
    if pack is not None:
        print(
            f"pack in the same run: {pack['wall_s']:.1f} s wall ({pack['cpu_s']:.1f} CPU-s); ratio "
            f"{args.placement} / pack: {out['ratio_to_pack']:.2f} (CPU: {out['ratio_to_pack_cpu']:.2f})"
        )
    print(
        f"ratio to RapidNetSim's published {ref:.0f} CPU-s (contention off): "
        f"{out['ratio_to_rapidnetsim']:.3f}"
    )


def agreement(args: argparse.Namespace) -> None:
    full = trace_scenario(args.jobs, args.days, args.seed, args.placement, args.fluid_min_jobs)
    window = args.window_h * 3600.0
    jobs = tuple(j for j in full.jobs if j.spec.arrival_s < window)
    sc = replace(full, jobs=jobs, horizon_s=window, name=f"{full.name}-first-{args.window_h:g}h")
    runs = {}
    for mode in ("fast", "exact"):
        c0 = time.process_time()
        runs[mode] = simulate_scenario(sc, policy=args.policy, mode=mode)
        print(
            f"{mode:5s}: {runs[mode].wall_time_s:7.1f} s wall ({time.process_time() - c0:.1f} CPU-s), "
            f"GPU utilisation {runs[mode].gpu_utilization:.4f}"
        )
    fast, exact = runs["fast"], runs["exact"]
    du = fast.gpu_utilization - exact.gpu_utilization
    print(
        f"{args.policy} on the first {args.window_h:g} h ({len(jobs)} jobs, {sc.topology.n_gpus} GPUs): "
        f"utilisation fast - exact = {du:+.4f} ({du / exact.gpu_utilization * 100:+.2f} % relative)"
    )
    ex = {j.id: j for j in exact.jobs}
    rel = []
    for j in fast.jobs:
        e = ex[j.id]
        if j.finished and e.finished and math.isfinite(e.jct_s) and e.jct_s > 0:
            rel.append(abs(j.jct_s - e.jct_s) / e.jct_s)
    if rel:
        r = np.array(rel)
        p95 = float(np.quantile(r, 0.95))
        print(
            f"per-job JCT |fast - exact| / exact over {r.size} jobs finished in both: "
            f"mean {r.mean() * 100:.2f} %, median {np.median(r) * 100:.2f} %, "
            f"p95 {p95 * 100:.2f} %, max {r.max() * 100:.2f} %"
        )
        ok = abs(du) <= UTIL_BOUND and p95 <= JCT_P95_BOUND
        print(
            f"bounds (utilisation within {UTIL_BOUND * 100:g} points, JCT within "
            f"{JCT_P95_BOUND * 100:g} % at p95): {'met' if ok else 'NOT met'}"
        )
    else:
        print("no job finished in both runs")
    print(f"wall-time ratio exact / fast: {exact.wall_time_s / fast.wall_time_s:.1f}")


#: the production-scale shape: jobs per GPU over the 14-day trace, GPUs per ToR
SCALE_JOBS_PER_GPU = 40_000 / 16_384
GPUS_PER_TOR = 32
TRACE_DAYS = 14.0


def scale_scenario(
    gpus: int, days: float, seed: int, policy: str, fluid_min_jobs: int | None = None
) -> Scenario:
    """The first ``days`` of the 14-day trace at ``gpus`` GPUs (module notes: ``--gpus``)."""
    if gpus < GPUS_PER_TOR or gpus % GPUS_PER_TOR:
        raise SystemExit(
            f"--gpus {gpus}: expected a positive multiple of {GPUS_PER_TOR} (4 hosts of 8 GPUs per ToR)"
        )
    data = _shipped_data("crux-fig23-clos")
    data["topology"] = {**data["topology"], "tors": gpus // GPUS_PER_TOR}
    jobs = round(SCALE_JOBS_PER_GPU * gpus)
    data["trace"] = {**data["trace"], "jobs": jobs, "days": TRACE_DAYS, "seed": seed}
    data["placement"] = "first-fit"
    data["backfill"] = True
    data["policy"] = policy
    data["horizon_s"] = days * DAY_S
    if fluid_min_jobs is not None:
        data["fluid_min_jobs"] = fluid_min_jobs
    data["name"] = f"crux-trace-{gpus}gpu-first-{days:g}d"
    sc = scenario_from_data(data, source="bench_trace_replay --gpus")
    return replace(sc, jobs=tuple(j for j in sc.jobs if j.spec.arrival_s < days * DAY_S))


def _scale_worker(args: argparse.Namespace) -> None:
    """One replay at ``--gpus`` (run in a child process by :func:`_scale_run`): prints its figures."""
    sc = scale_scenario(args.gpus, args.days, args.seed, args.policy, args.fluid_min_jobs)
    res = simulate_scenario(sc, policy=args.policy, mode="fast")
    print(
        json.dumps(
            {
                "gpus": sc.topology.n_gpus,
                "days": args.days,
                "policy": args.policy,
                "placement": "first-fit",
                "mode": "fast",
                "fluid_min_jobs": sc.fluid_min_jobs,
                "jobs": len(sc.jobs),
                "jobs_finished": sum(j.finished for j in res.jobs),
                "events": res.events,
                "gpu_utilization": res.gpu_utilization,
                "largest_component": res.largest_component,
                "largest_domain": res.largest_domain,
            }
        )
    )


def _scale_run(gpus: int, args: argparse.Namespace) -> dict[str, object]:
    """Replay one size in a process of its own; its CPU and peak memory, children included."""
    cmd = [sys.executable, __file__, "--scale-worker", "--gpus", str(gpus), "--days", str(args.days)]
    cmd += ["--seed", str(args.seed), "--policy", args.policy]
    if args.fluid_min_jobs is not None:
        cmd += ["--fluid-min-jobs", str(args.fluid_min_jobs)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"the replay at {gpus} GPUs failed: {proc.stderr.strip().splitlines()[-1:]}")
    out: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out |= {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "peak_rss_mb": round(after.ru_maxrss / 1024, 1)}
    return out


def _exponent(rows: list[dict[str, object]]) -> float:
    """Least-squares slope of log CPU-s against log GPUs."""
    x = np.log([float(str(r["gpus"])) for r in rows])
    y = np.log([float(str(r["cpu_s"])) for r in rows])
    return float(np.polyfit(x, y, 1)[0])


def scale(args: argparse.Namespace) -> None:
    sizes = [int(v) for v in args.series.split(",")] if args.series else [args.gpus]
    rows = []
    for n in sizes:
        row = _scale_run(n, args)
        rows.append(row)
        if not args.json:
            print(
                f"{row['gpus']:>6} GPUs {row['jobs']:>6} jobs: {row['cpu_s']:8.1f} CPU-s "
                f"({row['wall_s']:.1f} s wall), peak RSS {row['peak_rss_mb']:7.1f} MiB, "
                f"{row['events']} events, "
                f"utilisation {float(str(row['gpu_utilization'])):.4f}, largest component "
                f"{row['largest_component']} / domain {row['largest_domain']} jobs",
                flush=True,
            )
    if args.json:
        print(json.dumps(rows[0] if len(rows) == 1 else {"sizes": rows, "exponent": _exponent(rows)}))
        return
    if len(rows) > 1:
        base = float(str(rows[0]["cpu_s"]))
        ratios = ", ".join(f"{r['gpus']}: {float(str(r['cpu_s'])) / base:.2f}" for r in rows)
        print(f"CPU-s over the smallest size's: {ratios}")
        print(f"cost exponent (slope of log CPU-s on log GPUs): {_exponent(rows):.2f} (target <= 1.3)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--days", type=float, default=14.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--policy", default="crux-full")
    ap.add_argument(
        "--placement",
        default="pack",
        help="job scheduler (default pack; the shipped scenario's first-fit is slower: crowded components)",
    )
    ap.add_argument(
        "--no-pack-reference",
        action="store_true",
        help="with a placement other than pack, skip the pack replay the ratio is measured against",
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--agreement", action="store_true", help="fast against exact on the first hours")
    ap.add_argument("--window-h", type=float, default=6.0)
    ap.add_argument(
        "--fluid-min-jobs",
        type=int,
        help="the scenario key fluid_min_jobs for the fast replays (default: the scenario's, i.e. 0 = never)",
    )
    ap.add_argument(
        "--gpus",
        type=int,
        help="replay the production-scale shape at this many GPUs (first-fit, in a child process)",
    )
    ap.add_argument("--series", help="comma-separated GPU counts: replay each and print the cost exponent")
    ap.add_argument("--scale-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.scale_worker:
        _scale_worker(args)
    elif args.gpus or args.series:
        scale(args)
    elif args.agreement:
        agreement(args)
    else:
        bench(args)


if __name__ == "__main__":
    main()
