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


# ---------------------------------------------------------------------------------------------- readers
# Readers of what the command line writes (``simulate --out``, ``compare --out``): plain Python values,
# typed as the writers wrote them (empty CSV cells are NaN; booleans read from true/false or True/False).


def _read_json_file(path: Path, expected: str) -> Any:
    from commsched.errors import InputError

    if not path.is_file():
        raise InputError("file not found", where=str(path), expected=expected)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read JSON: {exc}", where=str(path), expected=expected) from None


def _cell(text: str) -> float:
    return float(text) if text != "" else float("nan")


def read_summary(out_dir: Path) -> dict[str, Any]:
    """The ``summary.json`` of a ``simulate --out`` directory, as written.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "summary.json").write_text('{"policy": "fair", "jobs": []}')
    >>> read_summary(d)["policy"]
    'fair'
    """
    data = _read_json_file(Path(out_dir) / "summary.json", "the summary.json that simulate --out writes")
    if not isinstance(data, dict):
        from commsched.errors import InputError

        raise InputError("not a JSON object", where=str(Path(out_dir) / "summary.json"), expected="a summary")
    return data


def read_utilization(out_dir: Path) -> dict[str, list[float]]:
    """The ``utilization.csv`` of a ``simulate --out`` directory: column name -> values.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "utilization.csv").write_text("t_s,gpu_utilization,allocated_gpu_utilization\\n1,0.5,\\n")
    >>> read_utilization(d)
    {'t_s': [1.0], 'gpu_utilization': [0.5], 'allocated_gpu_utilization': [nan]}
    """
    cols = ("t_s", "gpu_utilization", "allocated_gpu_utilization")
    out: dict[str, list[float]] = {c: [] for c in cols}
    for row in _read_csv(Path(out_dir) / "utilization.csv", cols):
        for c in cols:
            out[c].append(_cell(row[c]))
    return out


def read_links(out_dir: Path) -> list[dict[str, Any]]:
    """The rows of the ``links.csv`` of a ``simulate --out`` directory, typed.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "links.csv").write_text(
    ...     "t_s,link,src,dst,kind,utilization,gpu_intensity\\n2,7,tor0,agg0,fabric,0.25,\\n")
    >>> row = read_links(d)[0]
    >>> row["link"], row["src"], row["utilization"], row["gpu_intensity"]
    (7, 'tor0', 0.25, nan)
    """
    cols = ("t_s", "link", "src", "dst", "kind", "utilization", "gpu_intensity")
    return [
        {
            "t_s": _cell(r["t_s"]),
            "link": int(r["link"]),
            "src": r["src"],
            "dst": r["dst"],
            "kind": r["kind"],
            "utilization": _cell(r["utilization"]),
            "gpu_intensity": _cell(r["gpu_intensity"]),
        }
        for r in _read_csv(Path(out_dir) / "links.csv", cols)
    ]


def read_comparison(path: Path) -> dict[str, Any]:
    """A ``compare.json`` (the file, or the ``compare --out`` directory holding it), as written.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "compare.json").write_text('{"scenario": "s", "policies": {"fair": {}}}')
    >>> list(read_comparison(d)["policies"])
    ['fair']
    """
    p = Path(path)
    if p.is_dir():
        p = p / "compare.json"
    data = _read_json_file(p, "the compare.json that compare --out writes")
    if not isinstance(data, dict) or not isinstance(data.get("policies"), dict):
        from commsched.errors import InputError

        raise InputError("no 'policies' object", where=str(p), expected="a compare.json")
    return data


def _read_csv(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    from commsched.errors import InputError

    if not path.is_file():
        raise InputError("file not found", where=str(path), expected="a CSV file that simulate --out writes")
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(
                f"missing column(s) {', '.join(missing)}", where=str(path), expected=", ".join(columns)
            )
        return list(reader)
