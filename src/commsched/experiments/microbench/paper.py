"""Crux §4.4 optimality microbenchmark at paper scale (1,500 cases) — run once, prints the table.

Usage: ``python -m commsched.experiments.microbench.paper [--cases 1500] [--seed 0] [--workers N]
[--out FILE]``.
Prints the summary JSON (the same as ``commsched microbench --json``) plus the wall time and the number
of simulations; ``--out`` also writes every case's ratios as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

from commsched.experiments.microbench import run_microbench, summarise


def main(argv: Sequence[str] | None = None) -> int:
    """Run the microbenchmark at the command line's size; print the summary and the wall time."""
    ap = argparse.ArgumentParser(prog="python -m commsched.experiments.microbench.paper")
    ap.add_argument("--cases", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    results = run_microbench(args.cases, args.seed, workers=args.workers)
    wall = time.perf_counter() - t0
    summary = summarise(results)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            for r in results:
                fh.write(
                    json.dumps(
                        {
                            "case": r.case,
                            "optimum": r.optimum,
                            "ratios": {m: dict(v) for m, v in r.ratios.items()},
                        }
                    )
                    + "\n"
                )
    print(json.dumps(summary.as_json(), indent=2))
    per_case = summary.case_wall_s / max(1, summary.cases)
    print(
        f"{summary.cases} cases, {summary.simulations} simulations, wall {wall:.1f} s "
        f"on {args.workers} workers ({per_case:.2f} s per case on one core)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
