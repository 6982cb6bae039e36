"""``bench_trace_replay.py --agreement``: fast against exact mode on the first hours of the trace.

Replays the jobs that arrive in the first ``--window-h`` hours of the trace (draw ``--jitter-draw`` of it
when given: every arrival delayed by up to 1 ms) in fast and in exact mode, and exact mode once more on
the same window with every arrival delayed by up to 1 ms again (generator seeded ``[seed, K, 1]``, K the
draw, 0 for the trace as it is): how far exact mode moves on its own under a change far below anything
the trace means. Per-job JCT differences are ``|a - b| / b`` over the jobs finished in both runs (``b``
exact mode on the window); the utilisation difference is fast (or the jittered exact run) minus exact.

Bounds: the fast mode's (issue 16) utilisation within 0.5 points and JCT within 2 % at p95; the
replay-at-scale issue's, JCT p95 within max(0.5 %, exact mode's own p95) and utilisation within
max(0.001, exact mode's own move). ``--json`` prints one object: ``policy``, ``placement``, ``window_h``,
``jitter_draw``, ``jobs``, ``gpus``, ``fast_util``, ``exact_util``, ``util_diff``, ``jobs_compared``,
``jobs_left_out`` (finished in one run only), ``jct_mean``, ``jct_median``, ``jct_p95``, ``jct_max``
(fractions), ``exact_noise_util``, ``exact_noise_p95``, ``exact_noise_max``, ``noise_jobs_compared``,
``bound_util``, ``bound_p95``, ``within_bounds``, and per run (``fast``, ``exact``, ``noise``) its
``_cpu_s``, ``_wall_s`` and ``_events``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace
from typing import Any

import numpy as np

from commsched.api.runner import simulate_scenario
from commsched.sim.results.records import SimResult
from replay_common import jittered, trace_scenario

#: fast against exact (issue 16): GPU utilisation within 0.5 points, per-job JCT within 2 % at p95
UTIL_BOUND = 0.005
JCT_P95_BOUND = 0.02
#: the replay-at-scale issue: JCT p95 within max(this, exact's own), utilisation within max(this, exact's)
JCT_P95_FLOOR = 0.005
UTIL_FLOOR = 0.001
#: the third entry of the noise run's generator seed, ``[seed, draw, NOISE_SALT]``
NOISE_SALT = 1


def _jct_diffs(got: SimResult, ref: SimResult) -> tuple[list[float], int]:
    """``|got - ref| / ref`` of the JCT of the jobs finished in both runs; how many finished in one only."""
    ex = {j.id: j for j in ref.jobs}
    rel, one = [], 0
    for j in got.jobs:
        e = ex[j.id]
        if j.finished != e.finished:
            one += 1
        if j.finished and e.finished and math.isfinite(e.jct_s) and e.jct_s > 0:
            rel.append(abs(j.jct_s - e.jct_s) / e.jct_s)
    return rel, one


def _quantiles(rel: list[float]) -> dict[str, float | None]:
    if not rel:
        return {"mean": None, "median": None, "p95": None, "max": None}
    r = np.array(rel)
    return {
        "mean": float(r.mean()),
        "median": float(np.median(r)),
        "p95": float(np.quantile(r, 0.95)),
        "max": float(r.max()),
    }


def agreement(args: argparse.Namespace) -> None:
    full = trace_scenario(args.jobs, args.days, args.seed, args.placement, args.fluid_min_jobs)
    window = args.window_h * 3600.0
    jobs = tuple(j for j in full.jobs if j.spec.arrival_s < window)
    sc = replace(full, jobs=jobs, horizon_s=window, name=f"{full.name}-first-{args.window_h:g}h")
    draw = args.jitter_draw or 0
    if draw:
        sc = jittered(sc, args.seed, draw)
    twin = jittered(sc, args.seed, draw, salt=(NOISE_SALT,))
    runs: dict[str, SimResult] = {}
    cpu: dict[str, float] = {}
    for name, mode, s in (("fast", "fast", sc), ("exact", "exact", sc), ("noise", "exact", twin)):
        c0 = time.process_time()
        runs[name] = simulate_scenario(s, policy=args.policy, mode=mode)
        cpu[name] = time.process_time() - c0
        if not args.json:
            label = "exact, arrivals jittered" if name == "noise" else mode
            print(
                f"{label:5s}: {runs[name].wall_time_s:7.1f} s wall ({cpu[name]:.1f} CPU-s), "
                f"GPU utilisation {runs[name].gpu_utilization:.4f}",
                flush=True,
            )
    fast, exact, noise = runs["fast"], runs["exact"], runs["noise"]
    rel, left_out = _jct_diffs(fast, exact)
    nrel, _ = _jct_diffs(noise, exact)
    q, nq = _quantiles(rel), _quantiles(nrel)
    du = fast.gpu_utilization - exact.gpu_utilization
    nu = noise.gpu_utilization - exact.gpu_utilization
    bound_util = max(UTIL_FLOOR, abs(nu))
    bound_p95 = max(JCT_P95_FLOOR, nq["p95"] or 0.0)
    within = abs(du) <= bound_util and q["p95"] is not None and q["p95"] <= bound_p95
    out: dict[str, Any] = {
        "policy": args.policy,
        "placement": args.placement,
        "window_h": args.window_h,
        "jitter_draw": draw,
        "jobs": len(jobs),
        "gpus": sc.topology.n_gpus,
        "fast_util": fast.gpu_utilization,
        "exact_util": exact.gpu_utilization,
        "util_diff": du,
        "jobs_compared": len(rel),
        "jobs_left_out": left_out,
        **{f"jct_{k}": v for k, v in q.items()},
        "exact_noise_util": nu,
        "exact_noise_p95": nq["p95"],
        "exact_noise_max": nq["max"],
        "noise_jobs_compared": len(nrel),
        "bound_util": bound_util,
        "bound_p95": bound_p95,
        "within_bounds": within,
    }
    for name, r in runs.items():
        out |= {f"{name}_cpu_s": round(cpu[name], 2), f"{name}_wall_s": round(r.wall_time_s, 2)}
        out[f"{name}_events"] = r.events
    if args.json:
        print(json.dumps(out))
        return
    _print(args, out)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.2f} %"


def _print(args: argparse.Namespace, o: dict[str, Any]) -> None:
    du, exact_util = o["util_diff"], o["exact_util"]
    draw = f", draw {o['jitter_draw']}" if o["jitter_draw"] else ""
    print(
        f"{args.policy} on the first {args.window_h:g} h ({o['jobs']} jobs, {o['gpus']} GPUs{draw}): "
        f"utilisation fast - exact = {du:+.4f} ({du / exact_util * 100:+.2f} % relative)"
    )
    if o["jobs_compared"]:
        print(
            f"per-job JCT |fast - exact| / exact over {o['jobs_compared']} jobs finished in both "
            f"({o['jobs_left_out']} finished in one only): mean {_pct(o['jct_mean'])}, median "
            f"{_pct(o['jct_median'])}, p95 {_pct(o['jct_p95'])}, max {_pct(o['jct_max'])}"
        )
        ok = abs(du) <= UTIL_BOUND and o["jct_p95"] <= JCT_P95_BOUND
        print(
            f"bounds (utilisation within {UTIL_BOUND * 100:g} points, JCT within "
            f"{JCT_P95_BOUND * 100:g} % at p95): {'met' if ok else 'NOT met'}"
        )
    else:
        print("no job finished in both runs")
    print(
        f"exact mode's own move under a 1-ms jitter of the arrivals: utilisation "
        f"{o['exact_noise_util']:+.4f}, "
        f"JCT p95 {_pct(o['exact_noise_p95'])}, max {_pct(o['exact_noise_max'])} over "
        f"{o['noise_jobs_compared']} jobs"
    )
    print(
        f"bounds against exact mode's own move (utilisation within {o['bound_util']:.4f}, JCT p95 within "
        f"{o['bound_p95'] * 100:.2f} %): {'met' if o['within_bounds'] else 'NOT met'}"
    )
    print(f"wall-time ratio exact / fast: {o['exact_wall_s'] / max(o['fast_wall_s'], 1e-9):.1f}")
