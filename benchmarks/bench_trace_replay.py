"""Time crux-full replaying a Crux-scale trace (5,000 jobs, 14 days, 2,048 GPUs) in fast mode.

The fabric and calibration are those of the shipped ``crux-fig23-clos`` scenario (64 ToR x 16 Agg
two-layer Clos, 4:1 uplinks, compute 2x and bytes 10x the zoo's), placed by ``pack`` unless ``--placement``
says otherwise; only the trace is stretched to the paper's full two weeks (reference/crux-spec.md §6.5:
5,000+ jobs, two weeks, 2,000+ GPUs). Prints the wall time (and the process CPU time, the fairer figure
on a shared machine), its ratio to the 300 s budget (two cores), and its ratio to RapidNetSim's
published cost (358 CPU-s per 1,000 jobs on 1,024 GPUs with link contention switched off, ``DESIGN.md``;
scaled linearly to the job count).

``--agreement`` instead replays the jobs that arrive in the first ``--window-h`` hours (default 6) of
the same trace in fast and in exact mode, and exact mode once more with every arrival delayed by up to
1 ms (its own move), and prints the difference in GPU utilisation and the per-job JCT differences (jobs
finished in both runs), and whether they are within the bounds the fast mode is held to (utilisation
within 0.5 points, JCT within 2 % at p95; ``docs/simulator.md``) and within exact mode's own move
(``replay_agreement.py``'s notes, which also list the keys of its ``--json`` object).

Every replay runs in a process of its own and is measured there. With a placement other than ``pack``
the same run also replays ``pack`` and prints the ratio of the two (``--no-pack-reference`` skips it).
``--json`` prints one object instead: ``wall_s``, ``cpu_s`` (the replay alone: scenario built and
compiled kernel loaded before), ``peak_rss_mb`` (MiB, the peak of the replay's own process),
``gpu_utilization``, ``jobs``, ``jobs_finished``, ``gpus``, ``events``, ``ratio_to_budget`` (and
``_cpu``), ``ratio_to_rapidnetsim``, the engine's figures below, ``process_cpu_s`` and
``process_wall_s`` (the replay's process as a whole) and, with the pack reference, ``pack_wall_s``,
``pack_cpu_s``, ``pack_peak_rss_mb``, ``ratio_to_pack`` (and ``_cpu``).

``--gpus N`` replays the production-scale shape instead (issue "fast and right at production scale"):
the first ``--days`` days of the 14-day trace of ``40,000 x N / 16,384`` jobs on ``N / 32`` ToRs x 16 Aggs
(4 hosts of 8 GPUs per ToR, 4:1 uplinks, 100/25 Gb/s: ``crux-fig23-clos``'s shape), first-fit with
backfill, fast mode. The replay runs in a process of its own; ``cpu_s`` (user + system) is that
process's as a whole (interpreter, imports and scenario build included; ``replay_cpu_s`` the replay
alone) and ``peak_rss_mb`` (MiB) that process's own peak (``RUSAGE_SELF`` in it: each size's own in a
series). ``--json`` prints one object with ``gpus``, ``days``, ``policy``, ``placement``, ``jobs``,
``jobs_finished``, ``events``, ``cpu_s``, ``wall_s``, ``peak_rss_mb``, ``gpu_utilization``,
``fluid_min_jobs`` (the value the replay used: 0 = never), ``largest_component`` (the most jobs sharing
links at once) and ``largest_domain`` (the most jobs that could share a link, which a decision costs).
``--series 2048,4096,8192,16384`` runs each size in turn and prints the cost exponent: the slope of
log CPU-s against log GPUs (least squares), and each size's CPU-s over the smallest's; with ``--json``
one object, ``sizes`` (a row per size, as ``--gpus``'s object) and ``exponent``.

The engine's figures of every replay: ``extrapolated_job_fraction`` (the job-time the fast mode
extrapolated), ``largest_component``, ``largest_domain``, ``fluid_min_jobs``, and the cost per solve
(``replay_common.solve_clock``; ``--no-solve-costs`` leaves it out, about 1.5 us a step change):
``step_changes`` and ``step_change_s`` (calls of the compiled step change and their CPU seconds),
``miss_us`` and ``hit_us`` (CPU us per pace-cache miss, i.e. a re-solve, and per hit), and
``solves_by_size``: per component size (``slots``: 1, 2-4, 5-9, 10-29, 30+; a slot per job, two for a
job whose data-parallel stream runs beside its blocking one) ``miss_count``, ``miss_us``, ``hit_count``,
``hit_us``, ``collision_count`` and ``collision_us`` (cached paces found not the configuration's).

``--mode exact`` replays in exact mode instead of fast (every iteration simulated), and ``--loop
interpreted|compiled`` picks exact mode's event loop: the interpreted one (the reference, the default) or
the compiled one (``commsched.sim.loop.flatloop``: the flat events in compiled code, the same results). With
``--loop`` the solves are not timed (they cannot be inside compiled code; both loops are measured alike,
so run the two back to back: ``--gpus 2048 --days 1 --mode exact --loop interpreted`` then ``--loop
compiled``); the JSON object's ``mode`` and ``loop`` name them.

``--jitter-draw K`` (K >= 1) replays draw K of the trace on any of these paths: every arrival delayed
by a uniform draw in ``[0, 1 ms)``, generator seeded ``[seed, K]`` (``fast_vs_exact_scale.py``'s draw K).

Run: ``.venv/bin/python benchmarks/bench_trace_replay.py [--jobs 5000] [--days 14] [--policy crux-full]
[--placement pack] [--json]``,
``.venv/bin/python benchmarks/bench_trace_replay.py --agreement [--window-h 6] [--jitter-draw K] [--json]``,
``.venv/bin/python benchmarks/bench_trace_replay.py --gpus 16384 --days 2 [--json]`` or
``.venv/bin/python benchmarks/bench_trace_replay.py --series 2048,4096,8192,16384 --days 2``
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import Any

import numpy as np

from commsched.io.schema import Scenario
from replay_agreement import agreement  # the sibling modules (the benchmarks' folder is on the path)
from replay_common import (
    DAY_S,
    GPUS_PER_TOR,
    SCALE_JOBS_PER_GPU,
    TRACE_DAYS,
    check_gpus,
    fail,
    jittered,
    measured_replay,
    scale_scenario,
    trace_scenario,
)

__all__ = ["DAY_S", "GPUS_PER_TOR", "SCALE_JOBS_PER_GPU", "TRACE_DAYS", "scale_scenario", "trace_scenario"]

BUDGET_S = 300.0
RAPIDNETSIM_S_PER_JOB = 358.0 / 1000.0


def _scenario(args: argparse.Namespace, placement: str) -> Scenario:
    """The scenario a replay of this run is of: ``--gpus``'s shape or the trace, draw ``--jitter-draw``."""
    if args.gpus:
        sc = scale_scenario(args.gpus, args.days, args.seed, args.policy, args.fluid_min_jobs)
    else:
        sc = trace_scenario(args.jobs, args.days, args.seed, placement, args.fluid_min_jobs)
    return jittered(sc, args.seed, args.jitter_draw) if args.jitter_draw else sc


def _worker(args: argparse.Namespace) -> None:
    """One replay in this process (a child of :func:`_in_child`): prints its figures as one JSON line."""
    sc = _scenario(args, args.placement)
    loop = args.loop or "interpreted"
    costs = not args.no_solve_costs and args.loop is None  # --loop: both loops measured alike, untimed
    run = measured_replay(sc, args.policy, args.mode, solve_costs=costs, loop=loop)
    run |= {"days": args.days, "policy": args.policy, "jitter_draw": args.jitter_draw or 0}
    run["placement"] = "first-fit" if args.gpus else args.placement
    print(json.dumps(run))


def _in_child(args: argparse.Namespace, flag: str, extra: list[str]) -> dict[str, Any]:
    """Run ``flag``'s replay in a process of its own; its figures, and its CPU (user + system) and wall
    seconds as a whole process (interpreter, imports, kernel load and scenario build included)."""
    cmd = [sys.executable, __file__, flag, "--days", str(args.days), "--seed", str(args.seed)]
    cmd += ["--policy", args.policy, "--mode", args.mode, *extra]
    if args.loop is not None:
        cmd += ["--loop", args.loop]
    if args.fluid_min_jobs is not None:
        cmd += ["--fluid-min-jobs", str(args.fluid_min_jobs)]
    if args.jitter_draw:
        cmd += ["--jitter-draw", str(args.jitter_draw)]
    if args.no_solve_costs:
        cmd += ["--no-solve-costs"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        print(f"error: bench_trace_replay: the replay ({' '.join(extra)}) failed: {last}", file=sys.stderr)
        raise SystemExit(proc.returncode if proc.returncode == 2 else 1)
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out | {"process_cpu_s": round(cpu, 2), "process_wall_s": round(wall, 2)}


def _replay(args: argparse.Namespace, placement: str) -> dict[str, Any]:
    """One fast-mode replay of the trace, in a process of its own: wall and CPU seconds of the replay,
    its peak memory, GPU utilisation, jobs finished, events and the engine's figures."""
    return _in_child(args, "--replay-worker", ["--jobs", str(args.jobs), "--placement", placement])


def bench(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    _scenario(args, args.placement)
    t_load = time.perf_counter() - t0
    run = _replay(args, args.placement)
    ref = RAPIDNETSIM_S_PER_JOB * float(run["jobs"])
    out: dict[str, object] = {
        **run,
        "policy": args.policy,
        "placement": args.placement,
        "days": args.days,
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
            "pack_peak_rss_mb": pack["peak_rss_mb"],
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
    _print_engine(run)
    print(
        f"ratio to the {BUDGET_S:.0f} s budget: {out['ratio_to_budget']:.2f} "
        f"(CPU: {out['ratio_to_budget_cpu']:.2f})"
    )
    if pack is not None:
        print(
            f"pack in the same run: {pack['wall_s']:.1f} s wall ({pack['cpu_s']:.1f} CPU-s, peak RSS "
            f"{pack['peak_rss_mb']:.1f} MiB); ratio {args.placement} / pack: {out['ratio_to_pack']:.2f} "
            f"(CPU: {out['ratio_to_pack_cpu']:.2f})"
        )
    print(
        f"ratio to RapidNetSim's published {ref:.0f} CPU-s (contention off): "
        f"{out['ratio_to_rapidnetsim']:.3f}"
    )


def _print_engine(row: dict[str, Any], indent: str = "") -> None:
    """The engine's figures of one replay: memory, extrapolation, components, the cost per solve by size."""
    print(
        f"{indent}peak RSS {row['peak_rss_mb']:.1f} MiB, {row['extrapolated_job_fraction']:.3f} of the "
        f"job-time extrapolated, largest component {row['largest_component']} / domain "
        f"{row['largest_domain']} jobs, fluid_min_jobs {row['fluid_min_jobs']}"
    )
    if "solves_by_size" not in row:
        return
    print(
        f"{indent}step changes: {row['step_changes']} calls, {row['step_change_s']:.2f} CPU-s; "
        f"miss {row['miss_us']:.1f} us, hit {row['hit_us']:.1f} us"
    )
    for b in row["solves_by_size"]:
        if b["miss_count"] or b["hit_count"] or b["collision_count"]:
            miss = f"{b['miss_us']:.1f} us" if b["miss_us"] is not None else "-"
            hit = f"{b['hit_us']:.1f} us" if b["hit_us"] is not None else "-"
            print(
                f"{indent}  {b['slots']:>5} slots: {b['miss_count']:>8} misses {miss:>10}, "
                f"{b['hit_count']:>8} hits {hit:>9}, {b['collision_count']} collisions"
            )


def _scale_run(gpus: int, args: argparse.Namespace) -> dict[str, Any]:
    """Replay one size in a process of its own: its CPU as a whole process (children included) and the
    peak memory of that process alone (``RUSAGE_SELF`` in it, not the maximum over the series)."""
    out = _in_child(args, "--scale-worker", ["--gpus", str(gpus)])
    out["replay_cpu_s"] = out["cpu_s"]
    out["replay_wall_s"] = out["wall_s"]
    out |= {"cpu_s": out.pop("process_cpu_s"), "wall_s": out.pop("process_wall_s")}
    return out


def _exponent(rows: list[dict[str, Any]]) -> float:
    """Least-squares slope of log CPU-s against log GPUs."""
    x = np.log([float(r["gpus"]) for r in rows])
    y = np.log([float(r["cpu_s"]) for r in rows])
    return float(np.polyfit(x, y, 1)[0])


def scale(args: argparse.Namespace) -> None:
    try:
        sizes = [int(v) for v in args.series.split(",")] if args.series else [args.gpus]
    except ValueError:
        fail("--series", repr(args.series), "comma-separated GPU counts, e.g. 2048,4096")
    for n in sizes:
        check_gpus(n, "--series" if args.series else "--gpus")
    rows = []
    for n in sizes:
        row = _scale_run(n, args)
        rows.append(row)
        if not args.json:
            print(
                f"{row['gpus']:>6} GPUs {row['jobs']:>6} jobs: {row['cpu_s']:8.1f} CPU-s "
                f"({row['wall_s']:.1f} s wall; the replay alone {row['replay_cpu_s']:.1f} CPU-s), "
                f"peak RSS {row['peak_rss_mb']:7.1f} MiB, {row['events']} events, "
                f"utilisation {float(row['gpu_utilization']):.4f}",
                flush=True,
            )
            _print_engine(row, indent="    ")
    if args.json:
        print(json.dumps(rows[0] if len(rows) == 1 else {"sizes": rows, "exponent": _exponent(rows)}))
        return
    if len(rows) > 1:
        base = float(rows[0]["cpu_s"])
        ratios = ", ".join(f"{r['gpus']}: {float(r['cpu_s']) / base:.2f}" for r in rows)
        print(f"CPU-s over the smallest size's: {ratios}")
        print(f"cost exponent (slope of log CPU-s on log GPUs): {_exponent(rows):.2f} (target <= 1.2)")


def _jitter_draw(text: str | None) -> int | None:
    """``--jitter-draw``'s value: an integer K >= 1 (``None``: the trace as it is)."""
    if text is None:
        return None
    try:
        k = int(text)
    except ValueError:
        k = 0
    if k < 1:
        fail("--jitter-draw", repr(text), "an integer K >= 1: draw K of the trace")
    return k


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
    ap.add_argument(
        "--jitter-draw",
        metavar="K",
        help="replay draw K >= 1 of the trace: every arrival delayed by up to 1 ms (generator [seed, K])",
    )
    ap.add_argument(
        "--no-solve-costs",
        action="store_true",
        help="do not time the step changes (the cost per solve by size; about 1.5 us a call)",
    )
    ap.add_argument(
        "--mode",
        choices=("fast", "exact"),
        default="fast",
        help="the engine's mode of the replays (default fast; --agreement runs both)",
    )
    ap.add_argument(
        "--loop",
        choices=("interpreted", "compiled"),
        help="exact mode's event loop (default interpreted, the reference); with it, the solves go untimed",
    )
    ap.add_argument("--scale-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--replay-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.jitter_draw = _jitter_draw(args.jitter_draw)
    if args.loop == "compiled" and args.mode != "exact":
        fail("--loop", "compiled", "--mode exact: the compiled loop runs exact mode only")
    if args.scale_worker or args.replay_worker:
        _worker(args)
    elif args.gpus or args.series:
        scale(args)
    elif args.agreement:
        agreement(args)
    else:
        bench(args)


if __name__ == "__main__":
    main()
