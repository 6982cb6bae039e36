"""Which exact-mode golden jobs a one-ulp change of the inputs moves: how far an engine may round differently.

The engine issue holds every job of the crowded exact-mode goldens (``tests/sim/golden/crowded-*-exact.json``,
seeds 0-19 under crux-full and ecmp-fair, horizon 120 s) to its stored iterations and mean iteration time
within 1e-9 relative, except the *chaotic* jobs: those whose result moves by more than 1 % when every arrival
is delayed by up to 1 ms (the ``noise`` stored beside each golden). This script runs each case twice in
exact mode: as it is (the control: the engine must reproduce the goldens) and with every link's capacity
moved up by one unit in the last place (``numpy.nextafter``: about 1e-16 relative, the size of one rounding
difference anywhere in the engine), and counts the non-chaotic jobs that move by more than 1e-9.

If some do, an engine whose floating-point operations differ from the reference's in a single rounding
(another order of the water-filling's sums, a solve split into independent parts, a re-solve of only the
classes below a change) cannot be held to the goldens as the issue states: its results must be the
reference's bit for bit.

Usage::

    python benchmarks/ulp_sensitivity.py [--seeds 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from commsched.scheduling.policies import communication_policies
from commsched.sim.rates.flowkernel import warm_up
from commsched.sim.results.records import Mode, SimResult
from commsched.testing.crowded import ITER_NOISE, CrowdedCase, crowded_case, run_case
from commsched.topology import Topology

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "sim" / "golden"
POLICIES = ("crux-full", "ecmp-fair")
HORIZON_S = 120.0
RTOL = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    seed: int
    policy: str
    jobs: int
    chaotic: int
    #: non-chaotic jobs off their golden by more than 1e-9, as the case is (must be 0)
    control_moved: int
    #: the same with every capacity one ulp higher; their largest move and their stored jitter noise
    nudged_moved: int
    nudged_max_move: float
    nudged_noise: tuple[float, ...]


def nudged(case: CrowdedCase) -> CrowdedCase:
    """``case`` with every link's capacity one unit in the last place higher."""
    t = case.topology
    links = [replace(lk, capacity_bps=float(np.nextafter(lk.capacity_bps, np.inf))) for lk in t.links]
    topo = Topology(name=t.name, nodes=t.nodes, links=links, hosts=t.hosts, params=t.params)
    return replace(case, topology=topo)


def _rel(a: float, b: float) -> float:
    return 0.0 if a == b else abs(a - b) / max(abs(b), 1e-300)


def _moves(stored: dict[str, Any], result: SimResult) -> dict[str, float]:
    """Per non-chaotic job of ``stored``: its largest relative move (iterations, mean iteration time)."""
    noise = {k: float(v) for k, v in stored["noise"]["jobs"].items()}
    by_id = {j.id: j for j in result.jobs}
    out = {}
    for row in stored["jobs"]:
        if noise[row["id"]] > ITER_NOISE:
            continue
        j = by_id[row["id"]]
        move = _rel(float(j.iterations), float(row["iterations"]))
        if row["mean_iteration_s"] is not None and j.mean_iteration_s is not None:
            move = max(move, _rel(float(j.mean_iteration_s), float(row["mean_iteration_s"])))
        out[row["id"]] = move
    return out


def run_one(seed: int, policy: str) -> CaseResult:
    stored = json.loads((GOLDEN / f"crowded-{seed}--{policy}-h{HORIZON_S:g}-exact.json").read_text("utf-8"))
    noise = {k: float(v) for k, v in stored["noise"]["jobs"].items()}
    case = crowded_case(seed, horizon_s=HORIZON_S)
    fn = communication_policies()[policy]
    control = _moves(stored, run_case(case, fn, Mode.EXACT)[0])
    moved = {k: v for k, v in _moves(stored, run_case(nudged(case), fn, Mode.EXACT)[0]).items() if v > RTOL}
    return CaseResult(
        seed=seed,
        policy=policy,
        jobs=len(noise),
        chaotic=sum(1 for v in noise.values() if v > ITER_NOISE),
        control_moved=sum(1 for v in control.values() if v > RTOL),
        nudged_moved=len(moved),
        nudged_max_move=max(moved.values(), default=0.0),
        nudged_noise=tuple(sorted(noise[k] for k in moved)),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 (the goldens hold 0-19)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    if not 1 <= args.seeds <= 20:
        ap.error(f"--seeds {args.seeds}: expected 1..20 (the goldens hold seeds 0-19)")
    warm_up()
    t0 = time.process_time()
    results = [run_one(s, p) for s in range(args.seeds) for p in POLICIES]
    noises = [n for r in results for n in r.nudged_noise]
    summary: dict[str, Any] = {
        "jobs": sum(r.jobs for r in results),
        "chaotic": sum(r.chaotic for r in results),
        "control_moved": sum(r.control_moved for r in results),
        "nudged_moved": sum(r.nudged_moved for r in results),
        "nudged_max_move": max(r.nudged_max_move for r in results),
        "nudged_noise_range": [min(noises, default=0.0), max(noises, default=0.0)],
        "cpu_s": time.process_time() - t0,
    }
    if args.json:
        print(json.dumps({"cases": [asdict(r) for r in results], **summary}))
        return 0
    head = f"{'case':<22}{'jobs':>5}{'chaotic':>8}{'control':>8}{'nudged':>7}{'max move':>10}"
    print(head + "  jitter noise of those")
    for r in results:
        noise = ", ".join(f"{n:.2%}" for n in r.nudged_noise)
        print(
            f"{f'seed {r.seed} {r.policy}':<22}{r.jobs:>5}{r.chaotic:>8}{r.control_moved:>8}"
            f"{r.nudged_moved:>7}{r.nudged_max_move:>10.2e}  {noise}"
        )
    lo, hi = summary["nudged_noise_range"]
    print(
        f"{summary['jobs']} jobs, {summary['chaotic']} chaotic; as they are, {summary['control_moved']} "
        f"non-chaotic jobs off their goldens; with every capacity one ulp higher, {summary['nudged_moved']} "
        f"(largest move {summary['nudged_max_move']:.2e}; their 1 ms jitter noise {lo:.2%}-{hi:.2%}); "
        f"{summary['cpu_s']:.0f} CPU-s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
