"""Machine-readable results: the JSON summary and CSV time series of a simulation."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from commsched.sim.records import SimResult
from commsched.topology import Topology


def _num(x: float) -> float | None:
    """JSON has no NaN: unknown values become null."""
    return None if (x is None or not math.isfinite(x)) else float(x)


def result_summary(result: SimResult, *, include_wall_time: bool = True) -> dict[str, Any]:
    """The summary printed by ``simulate --json``; every field but ``wall_time_s`` is deterministic."""
    jobs = []
    for j in result.jobs:
        jobs.append(
            {
                "id": j.id,
                "gpus": j.gpus,
                "iterations": _num(j.iterations),
                "finished": j.finished,
                "arrival_s": _num(j.arrival_s),
                "start_s": _num(j.start_s) if j.start_s is not None else None,
                "end_s": _num(j.end_s) if j.end_s is not None else None,
                "jct_s": _num(j.jct_s),
                "wait_s": _num(j.wait_s),
                "run_s": _num(j.run_s),
                "standalone_iteration_s": _num(j.standalone_iteration_s),
                "mean_iteration_s": _num(j.mean_iteration_s),
                "slowdown": _num(j.slowdown),
                "priority_class": j.priority_class,
                "intensity": _num(j.intensity),
                "shared_links": j.shared_links,
            }
        )
    out: dict[str, Any] = {
        "policy": result.policy,
        "mode": str(result.mode),
        "seed": result.seed,
        "cluster_gpus": result.cluster_gpus,
        "gpu_utilization": _num(result.gpu_utilization),
        "allocated_gpu_utilization": _num(result.allocated_gpu_utilization),
        "sim_time_s": _num(result.sim_time_s),
        "window_s": [_num(result.window_s[0]), _num(result.window_s[1])],
        "events": result.events,
        "jobs": jobs,
    }
    if include_wall_time:
        out["wall_time_s"] = round(result.wall_time_s, 6)
    return out


def write_outputs(result: SimResult, topology: Topology, out_dir: Path) -> list[Path]:
    """Write ``summary.json``, ``jobs.csv``, ``utilization.csv`` and ``links.csv`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    summary = result_summary(result)
    p = out_dir / "summary.json"
    p.write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    written.append(p)
    p = out_dir / "jobs.csv"
    with p.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(summary["jobs"][0].keys()) if summary["jobs"] else ["id"])
        w.writeheader()
        for row in summary["jobs"]:
            w.writerow(row)
    written.append(p)
    s = result.series
    p = out_dir / "utilization.csv"
    with p.open("w", newline="", encoding="utf-8") as fh:
        w2 = csv.writer(fh)
        w2.writerow(["t_s", "gpu_utilization", "allocated_gpu_utilization"])
        for t, u, a in zip(
            s.t.tolist(), s.gpu_utilization.tolist(), s.allocated_gpu_utilization.tolist(), strict=True
        ):
            w2.writerow(
                [
                    f"{t:.6g}",
                    "" if not math.isfinite(u) else f"{u:.6g}",
                    "" if not math.isfinite(a) else f"{a:.6g}",
                ]
            )
    written.append(p)
    p = out_dir / "links.csv"
    used = (
        np.flatnonzero(np.nansum(s.link_utilization, axis=0) > 0)
        if s.link_utilization.size
        else np.zeros(0, int)
    )
    with p.open("w", newline="", encoding="utf-8") as fh:
        w3 = csv.writer(fh)
        w3.writerow(["t_s", "link", "src", "dst", "kind", "utilization", "gpu_intensity"])
        for k, t in enumerate(s.t.tolist()):
            for lid in used.tolist():
                lk = topology.links[lid]
                u = float(s.link_utilization[k, lid])
                inten = float(s.link_intensity[k, lid])
                w3.writerow(
                    [
                        f"{t:.6g}",
                        lid,
                        lk.src,
                        lk.dst,
                        lk.kind,
                        f"{u:.6g}",
                        "" if not math.isfinite(inten) else f"{inten:.6g}",
                    ]
                )
    written.append(p)
    return written
