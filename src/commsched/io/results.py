"""Machine-readable results: the JSON summary and CSV time series of a simulation."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from commsched.io.numbers import clamp_fraction, tidy
from commsched.sim.records import SimResult
from commsched.topology import Topology


def _num(x: float) -> float | None:
    """JSON has no NaN: unknown values become null."""
    return None if (x is None or not math.isfinite(x)) else float(x)


def result_summary(
    result: SimResult,
    *,
    include_wall_time: bool = True,
    scenario: str | None = None,
    placement: str | None = None,
) -> dict[str, Any]:
    """The summary printed by ``simulate --json``; every field but ``wall_time_s`` is deterministic.

    ``scenario``, ``policy``, ``placement``, ``mode``, ``seed`` and ``commsched_version`` say what
    produced the results. Values keep full precision here; :func:`write_outputs` and ``--json`` round
    them at the edge (see :func:`commsched.io.numbers.tidy`).
    """
    from commsched import __version__

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
        "scenario": scenario,
        "policy": result.policy,
        "placement": placement,
        "mode": str(result.mode),
        "seed": result.seed,
        "commsched_version": __version__,
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


def _cell(x: object) -> object:
    """A CSV cell: booleans as ``true``/``false`` (as in JSON), missing values empty."""
    if isinstance(x, bool):
        return "true" if x else "false"
    return "" if x is None else x


def _csv(rows: list[list[object]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for r in rows:
        w.writerow([_cell(c) for c in r])
    return buf.getvalue()


def _g(x: float) -> str:
    return "" if not math.isfinite(x) else f"{x:.6g}"


def write_files(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Write several files into ``out_dir`` so that a crash leaves the old results or the new ones.

    Every file is first written completely under a temporary name in ``out_dir``; only then are they
    renamed over the old ones (renames within a folder are atomic). A failure while writing leaves the
    old files untouched and removes the temporary ones.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    staged: list[tuple[str, Path]] = []
    try:
        for name, text in files.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out_dir)
            staged.append((tmp, out_dir / name))
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
        for tmp, final in staged:
            os.replace(tmp, final)
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
    return [final for _, final in staged]


def write_outputs(
    result: SimResult,
    topology: Topology,
    out_dir: Path,
    *,
    scenario: str | None = None,
    placement: str | None = None,
) -> list[Path]:
    """Write ``summary.json``, ``jobs.csv``, ``utilization.csv`` and ``links.csv`` into ``out_dir``
    (atomically, see :func:`write_files`)."""
    summary = tidy(result_summary(result, scenario=scenario, placement=placement))
    assert isinstance(summary, dict)
    files: dict[str, str] = {"summary.json": json.dumps(summary, indent=2, allow_nan=False) + "\n"}
    cols = list(summary["jobs"][0].keys()) if summary["jobs"] else ["id"]
    files["jobs.csv"] = _csv([cols, *([row[c] for c in cols] for row in summary["jobs"])])
    s = result.series
    rows: list[list[object]] = [["t_s", "gpu_utilization", "allocated_gpu_utilization"]]
    for t, u, a in zip(
        s.t.tolist(), s.gpu_utilization.tolist(), s.allocated_gpu_utilization.tolist(), strict=True
    ):
        rows.append([f"{t:.6g}", _g(clamp_fraction(u)), _g(clamp_fraction(a))])
    files["utilization.csv"] = _csv(rows)
    used = (
        np.flatnonzero(np.nansum(s.link_utilization, axis=0) > 0)
        if s.link_utilization.size
        else np.zeros(0, int)
    )
    rows = [["t_s", "link", "src", "dst", "kind", "utilization", "gpu_intensity"]]
    for k, t in enumerate(s.t.tolist()):
        for lid in used.tolist():
            lk = topology.links[lid]
            u = float(s.link_utilization[k, lid])
            rows.append(
                [f"{t:.6g}", lid, lk.src, lk.dst, lk.kind, _g(u), _g(float(s.link_intensity[k, lid]))]
            )
    files["links.csv"] = _csv(rows)
    return write_files(out_dir, files)
