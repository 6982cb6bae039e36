"""Attribute the utilisation gap between two policies on a scenario to the jobs that make it.

Runs both policies (``commsched.api.comparing``), then prints: the utilisation difference; the
busy GPU-seconds gained and lost per job (their sum is the difference times GPUs x horizon); the split
between jobs within one ToR and jobs spanning ToRs; the largest losers and gainers with their class,
intensity and throughput loss under each policy; and the per-job loss distribution of each.

Run: ``.venv/bin/python benchmarks/fig23_gaps.py crux-fig23-clos-4agg crux-ps-pa crux-full
[--hours 24] [--jitter-s 1] [--workers 2] [--top 8]`` (see docs/fig23-gaps.md).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

import numpy as np

from commsched.api.comparing import compare_named as compare
from commsched.io.scenario import Scenario
from commsched.io.shipped import resolve_scenario
from commsched.sim.results.comparison import LossDistribution, throughput_loss
from commsched.sim.results.records import JobResult
from commsched.topology import Topology


def _tors(topo: Topology, j: JobResult) -> int:
    return len({topo.host_of(g).tors for g in j.placement})


def _loss(j: JobResult) -> float:
    if j.start_s is None or not math.isfinite(j.mean_iteration_s) or j.mean_iteration_s <= 0:
        return math.nan
    return max(0.0, 1.0 - j.standalone_iteration_s / j.mean_iteration_s)


def _line(topo: Topology, a: JobResult, b: JobResult) -> str:
    return (
        f"  {a.id} {a.gpus:4d} GPUs, ToRs {_tors(topo, a)}/{_tors(topo, b)}: "
        f"{(b.busy_gpu_s - a.busy_gpu_s) / 3600:+8.0f} GPU-h; class {a.priority_class}/{b.priority_class}, "
        f"I {a.intensity:.1f}/{b.intensity:.1f}, loss {_loss(a):.2f}/{_loss(b):.2f}, "
        f"wait {a.wait_s:.0f}/{b.wait_s:.0f} s"
    )


def windowed_scenario(name: str, hours: float | None, jitter_s: float, jitter_seed: int) -> Scenario:
    """The shipped scenario ``name``, cut to jobs arriving in the first ``hours`` (all with None),
    every arrival delayed by a uniform draw in ``[0, jitter_s)`` (the replay's sensitivity)."""
    sc = resolve_scenario(name)
    if hours is not None:
        window = hours * 3600.0
        sc = replace(sc, jobs=tuple(j for j in sc.jobs if j.spec.arrival_s < window), horizon_s=window)
    if jitter_s > 0:
        delays = np.random.default_rng(jitter_seed).uniform(0.0, jitter_s, size=len(sc.jobs))
        jobs = tuple(
            replace(j, spec=replace(j.spec, arrival_s=j.spec.arrival_s + float(dt)))
            for j, dt in zip(sc.jobs, delays, strict=True)
        )
        sc = replace(sc, jobs=jobs)
    return sc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("a", help="reference policy")
    ap.add_argument("b", help="policy compared with it")
    ap.add_argument("--hours", type=float, default=None, help="only jobs arriving in the first hours")
    ap.add_argument(
        "--jitter-s",
        type=float,
        default=0.0,
        help="delay every arrival by a uniform draw in [0, JITTER_S) (the replay's sensitivity)",
    )
    ap.add_argument("--jitter-seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args()
    sc = windowed_scenario(args.scenario, args.hours, args.jitter_s, args.jitter_seed)
    cmp = compare(sc, (args.a, args.b), workers=args.workers)
    ra, rb = cmp.results
    topo = sc.topology
    scale = topo.n_gpus * sc.horizon_s / 100.0  # GPU-seconds per utilisation point
    print(
        f"{sc.name} ({len(sc.jobs)} jobs, {sc.horizon_s / 3600:g} h): {args.a} {ra.gpu_utilization:.4f}, "
        f"{args.b} {rb.gpu_utilization:.4f}, difference "
        f"{100 * (rb.gpu_utilization - ra.gpu_utilization):+.2f} points; "
        f"wall {ra.wall_time_s:.0f} s + {rb.wall_time_s:.0f} s"
    )
    by_b = {j.id: j for j in rb.jobs}
    pairs = [(j, by_b[j.id]) for j in ra.jobs]
    d = np.array([b.busy_gpu_s - a.busy_gpu_s for a, b in pairs])
    print(
        f"per job: {int((d > 0).sum())} gain {d[d > 0].sum() / scale:+.2f} points, "
        f"{int((d < 0).sum())} lose {d[d < 0].sum() / scale:+.2f} points"
    )
    for label, multi in (("within one ToR", False), ("spanning ToRs", True)):
        sel = [(a, b) for a, b in pairs if (_tors(topo, a) > 1) == multi and a.placement]
        diff = sum(b.busy_gpu_s - a.busy_gpu_s for a, b in sel) / scale
        la = np.nanmean([_loss(a) for a, _ in sel]) if sel else math.nan
        lb = np.nanmean([_loss(b) for _, b in sel]) if sel else math.nan
        print(
            f"  {label} (under {args.a}): {len(sel)} jobs, {diff:+.2f} points, mean loss {la:.3f} -> {lb:.3f}"
        )
    order = sorted(pairs, key=lambda p: p[1].busy_gpu_s - p[0].busy_gpu_s)
    print(f"largest losers ({args.a}/{args.b}):")
    for a, b in order[: args.top]:
        print(_line(topo, a, b))
    print(f"largest gainers ({args.a}/{args.b}):")
    for a, b in order[::-1][: args.top]:
        print(_line(topo, a, b))
    for name, r in ((args.a, ra), (args.b, rb)):
        dist = LossDistribution.of(throughput_loss(r))
        print(
            f"{name}: loss p50 {dist.p50:.3f} p95 {dist.p95:.3f} p99 {dist.p99:.3f} max {dist.max:.3f}, "
            f"{dist.over_half} jobs over 50 %; {sum(j.finished for j in r.jobs)} finished"
        )


if __name__ == "__main__":
    main()
