"""Fast against exact mode over days at cluster scale, against exact mode's own spread.

Replays the production-scale shape of ``bench_trace_replay.py --gpus N --days D`` (first-fit with
backfill, crux-full unless ``--policy`` says otherwise) in exact and in fast mode, on ``--draws``
versions of the same trace: draw 0 is the trace as it is, draw ``k > 0`` moves every arrival later by
a uniform draw in ``[0, 1 ms)`` (generator seeded ``[seed, k]``), a change far below anything the
trace means, which shows how far exact mode itself moves (its *spread*). A fast mode that is right
lands within exact mode's spread; one biased lands outside it on every draw.

Prints per draw the cluster's GPU utilisation in both modes and the fast mode's per-job JCT errors
against exact mode on the same draw (jobs that finished in both) beside exact mode's own (draw ``k``
against draw 0), then the exact mean and spread
(largest minus smallest), the fast mean, the **bias** (fast mean minus exact mean) and the bias over
exact mode's spread, and the CPU time of each run.

``--jumps periodic|measured|none`` switches the fast mode's other kind of jump off, to tell which
kind a gap comes with (a diagnostic: it replaces, in the worker process only, the period search
or the measured-regime search by "none found"); ``none`` leaves the fast mode's machinery without a
jump, which must reproduce exact mode bit for bit. ``--json`` prints one object: ``draws`` (one per
draw: ``draw``, ``exact_util``, ``fast_util``, ``util_diff``, ``jct_p5``, ``jct_p50``, ``jct_p95``,
``jobs_compared``, ``jobs_left_out`` (finished in one mode only), ``exact_noise_p5``,
``exact_noise_p95`` (NaN on draw 0), ``exact_cpu_s``, ``fast_cpu_s``) and
``exact_mean``, ``exact_spread``, ``fast_mean``, ``bias``, ``bias_over_spread``.

Run: ``.venv/bin/python benchmarks/fast_vs_exact_scale.py [--gpus 2048] [--days 2] [--draws 3]
[--jumps both] [--workers 2] [--json]`` (2,048 GPUs x 2 days: about 3 CPU-minutes per exact run,
15 CPU-s per fast run).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from commsched.api.runner import simulate_scenario
from replay_common import jittered, scale_scenario  # the sibling helper (its folder is on the path)

#: a spread of exact mode's utilisation below this is no spread (rounding)
SPREAD_FLOOR = 1e-6


def _switch_off(jumps: str) -> None:
    """Leave the fast mode only the kind of jump ``jumps`` names (this process only)."""
    from commsched.sim.fast import measured, steady
    from commsched.sim.fast import mode as fast

    if jumps in ("measured", "none"):  # no period is ever found

        def no_match(hist: Any, sig: Any) -> tuple[int, float]:
            return -1, float("inf")

        setattr(fast, "best_match", no_match)  # noqa: B010 -- the module's global, looked up per call
        setattr(fast, "best_relative_match", no_match)  # noqa: B010
    if jumps in ("periodic", "none"):  # no measured regime is ever extrapolated

        def measure(self: Any, *args: Any) -> None:  # (comp, runs, hist, sig, links): remember only
            steady.remember(args[2], args[3], keep=self._config.fast_max_history)

        setattr(measured.MeasuredRegimes, "measure", measure)  # noqa: B010


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    """One replay: the shape, the draw of the trace and the mode."""

    gpus: int
    days: float
    seed: int
    policy: str
    jumps: str
    draw: int
    mode: str


def _run(rp: Replay) -> dict[str, Any]:
    """One replay (in a worker process): utilisation, CPU seconds, and per job its JCT if finished."""
    if rp.mode == "fast" and rp.jumps != "both":
        _switch_off(rp.jumps)
    seed, draw, policy = rp.seed, rp.draw, rp.policy
    sc = scale_scenario(rp.gpus, rp.days, seed, policy)
    if draw > 0:
        sc = jittered(sc, seed, draw)  # the same draw as bench_trace_replay.py --jitter-draw
    c0 = time.process_time()
    res = simulate_scenario(sc, policy=policy, mode=rp.mode)
    return {
        "draw": draw,
        "mode": rp.mode,
        "cpu_s": time.process_time() - c0,
        "util": float(res.gpu_utilization),
        "jct": {str(j.id): j.end_s - j.arrival_s for j in res.jobs if j.finished and j.end_s is not None},
    }


def _jct_errors(got: dict[str, Any], ref: dict[str, Any]) -> NDArray[np.float64]:
    """``got``'s JCT over ``ref``'s, minus one, for the jobs that finished in both."""
    both = sorted(set(ref["jct"]) & set(got["jct"]))
    return np.array([got["jct"][k] / ref["jct"][k] - 1.0 for k in both if ref["jct"][k] > 0])


def _row(exact: dict[str, Any], fast: dict[str, Any], exact0: dict[str, Any]) -> dict[str, Any]:
    """One draw's comparison; ``exact0``: exact mode on draw 0 (its own noise, from draw 1 on)."""
    err = _jct_errors(fast, exact)
    pct = np.percentile(err, [5, 50, 95]) if err.size else np.full(3, np.nan)
    noise = _jct_errors(exact, exact0) if exact is not exact0 else np.zeros(0)
    npct = np.percentile(noise, [5, 95]) if noise.size else np.full(2, np.nan)
    return {
        "draw": exact["draw"],
        "exact_util": exact["util"],
        "fast_util": fast["util"],
        "util_diff": fast["util"] - exact["util"],
        "jobs_compared": int(err.size),
        # finished in one mode only (a JCT has no counterpart): left out of the JCT errors, counted
        "jobs_left_out": len(set(exact["jct"]) ^ set(fast["jct"])),
        "jct_p5": float(pct[0]),
        "jct_p50": float(pct[1]),
        "jct_p95": float(pct[2]),
        "exact_noise_p5": float(npct[0]),
        "exact_noise_p95": float(npct[1]),
        "exact_cpu_s": round(exact["cpu_s"], 1),
        "fast_cpu_s": round(fast["cpu_s"], 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=2048)
    ap.add_argument("--days", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=7, help="the trace's seed (bench_trace_replay's default)")
    ap.add_argument("--policy", default="crux-full")
    ap.add_argument("--draws", type=int, default=3, help="versions of the trace (0: as it is; k>0: jittered)")
    ap.add_argument("--jumps", choices=("both", "periodic", "measured", "none"), default="both")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if args.draws < 1 or args.workers < 1:
        print("fast_vs_exact_scale.py: --draws and --workers: expected at least 1", file=sys.stderr)
        raise SystemExit(2)
    tasks = [(d, m) for d in range(args.draws) for m in ("exact", "fast")]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        shape = {"gpus": args.gpus, "days": args.days, "seed": args.seed, "policy": args.policy}
        futs = {t: pool.submit(_run, Replay(**shape, jumps=args.jumps, draw=t[0], mode=t[1])) for t in tasks}
        got = {t: f.result() for t, f in futs.items()}
    rows = [_row(got[(d, "exact")], got[(d, "fast")], got[(0, "exact")]) for d in range(args.draws)]
    ex = np.array([r["exact_util"] for r in rows])
    fa = np.array([r["fast_util"] for r in rows])
    spread = float(ex.max() - ex.min())
    bias = float(fa.mean() - ex.mean())
    out = {
        "gpus": args.gpus,
        "days": args.days,
        "policy": args.policy,
        "jumps": args.jumps,
        "draws": rows,
        "exact_mean": float(ex.mean()),
        "exact_spread": spread,
        "fast_mean": float(fa.mean()),
        "bias": bias,
        "bias_over_spread": bias / spread if spread > SPREAD_FLOOR else None,
    }
    if args.json:
        print(json.dumps(out))
        return
    print(f"{args.gpus} GPUs x {args.days:g} days, {args.policy}, fast mode with jumps: {args.jumps}")
    for r in rows:
        print(
            f"draw {r['draw']}: utilisation exact {r['exact_util']:.4f} fast {r['fast_util']:.4f} "
            f"({r['util_diff']:+.4f}); JCT fast/exact - 1 over {r['jobs_compared']} jobs "
            f"({r['jobs_left_out']} finished in one mode only, left out): "
            f"p5 {r['jct_p5']:+.3f} p50 {r['jct_p50']:+.3f} p95 {r['jct_p95']:+.3f}"
            + (
                f" (exact mode's own, against draw 0: p5 {r['exact_noise_p5']:+.3f} "
                f"p95 {r['exact_noise_p95']:+.3f})"
                if r["draw"] > 0
                else ""
            )
            + "; "
            f"CPU-s exact {r['exact_cpu_s']} fast {r['fast_cpu_s']}"
        )
    ratio = (
        f"{bias / spread:.1f}x exact mode's spread" if spread > SPREAD_FLOOR else "exact mode did not move"
    )
    print(
        f"exact mean {ex.mean():.4f} (spread {spread:.4f}), fast mean {fa.mean():.4f}: "
        f"bias {bias:+.4f} ({ratio})"
    )


if __name__ == "__main__":
    main()
