"""Time one policy replaying the vClos Table 5 trace (5,000 Helios-like tasks on CLUSTER512, lambda = 120 s).

Prints the wall time of one simulation and its ratio to the 180 s budget (two cores), and to the
published cost of RapidNetSim, the paper's simulator (358 CPU-s per 1,000 jobs on 1,024 GPUs with
link contention switched off, ``DESIGN.md``; scaled linearly to the task count). The trace generation
and the standalone-time calibration are timed separately.

Run: ``.venv/bin/python benchmarks/bench_vclos_replay.py [--policy vclos] [--tasks 5000] [--lambda 120]``
"""

from __future__ import annotations

import argparse
import time

from commsched.experiments.vclos_experiment import ExperimentSpec, run_policy, scenario_trace, trace_scenario
from commsched.io.shipped import resolve_scenario

BUDGET_S = 180.0
RAPIDNETSIM_S_PER_JOB = 358.0 / 1000.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", default="vclos")
    ap.add_argument("--tasks", type=int, default=5000)
    ap.add_argument("--lambda", dest="lam", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    base = resolve_scenario("vclos-table5-512")
    section, _ = scenario_trace("vclos-table5-512")
    spec = ExperimentSpec(trace=section, overrides={"tasks": args.tasks, "seed": args.seed})
    t0 = time.perf_counter()
    sc = trace_scenario(base, spec.section(args.lam))
    t_trace = time.perf_counter() - t0
    run = run_policy(sc, args.policy, args.lam)
    ref = RAPIDNETSIM_S_PER_JOB * args.tasks
    print(f"trace generation + calibration: {t_trace:.2f} s")
    print(
        f"{args.policy} on vclos-table5-512, {args.tasks} tasks, lambda={args.lam:g} s: "
        f"{run.wall_s:.1f} s wall (avg JCT {run.times.jct_s:.1f} s, {run.times.finished} finished)"
    )
    print(f"ratio to the {BUDGET_S:.0f} s budget: {run.wall_s / BUDGET_S:.2f}")
    print(f"ratio to RapidNetSim's published {ref:.0f} CPU-s (contention off): {run.wall_s / ref:.3f}")


if __name__ == "__main__":
    main()
