"""Machine-readable results: the JSON summary and CSV time series of a simulation."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import secrets
from pathlib import Path
from typing import Any

import numpy as np

from commsched.io.numbers import clamp_fraction, tidy, tidy_float
from commsched.sim.results.records import SimResult
from commsched.topology import Topology


def _num(x: float) -> float | None:
    """JSON has no NaN: unknown values become null."""
    return None if (x is None or not math.isfinite(x)) else float(x)


def _count(x: float) -> int | float | None:
    """An iteration count: an integer where it is one (a fast mode's credit may be a fraction).

    Examples
    --------
    >>> _count(30.0), _count(12.5), _count(float("nan"))
    (30, 12.5, None)
    """
    if x is None or not math.isfinite(x):
        return None
    return int(x) if float(x).is_integer() else float(x)


def _fabric(pairs: tuple[tuple[str, float], ...]) -> dict[str, float | None]:
    """``{tp, pp, dp, ep}`` always present (null: unknown)."""
    got = dict(pairs)
    return {k: _num(got.get(k, float("nan"))) for k in ("tp", "pp", "dp", "ep")}


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
    from commsched._version import __version__

    jobs = []
    for j in result.jobs:
        jobs.append(
            {
                "id": j.id,
                "gpus": j.gpus,
                "iterations": _count(j.iterations),
                "finished": j.finished,
                "arrival_s": _num(j.arrival_s),
                "start_s": _num(j.start_s) if j.start_s is not None else None,
                "end_s": _num(j.end_s) if j.end_s is not None else None,
                "jct_s": _num(j.jct_s),
                "wait_s": _num(j.wait_s),
                "run_s": _num(j.run_s),
                "standalone_iteration_s": _num(j.standalone_iteration_s),
                # alone on the empty cluster, its flows spread: the same under every policy (slowdown's
                # reference, commsched.sim.results.ideal)
                "ideal_iteration_s": _num(j.ideal_iteration_s),
                "mean_iteration_s": _num(j.mean_iteration_s),
                "slowdown": _num(j.slowdown),
                "priority_class": j.priority_class,
                "intensity": _num(j.intensity),
                "shared_links": j.shared_links,
                "fabric_bytes_per_iteration": _fabric(j.fabric_bytes_per_iteration),
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
        # fast mode: the share of the jobs' time extrapolated, and what the checks of the stretches saw
        "extrapolated_job_fraction": _num(result.extrapolated_job_fraction),
        "fast_checks": result.fast_checks,
        "fast_checks_failed": result.fast_checks_failed,
        "worst_check_disagreement": _num(result.worst_check_disagreement),
    }
    if include_wall_time:
        out["wall_time_s"] = round(result.wall_time_s, 6)
    return out


def _cell(x: object) -> object:
    """A CSV cell: booleans as ``true``/``false`` (as in JSON), missing values empty, a mapping or list
    as JSON (never a Python repr).

    Examples
    --------
    >>> _cell({"tp": 0.0, "dp": None}), _cell(True), _cell(None), _cell(3)
    ('{"tp": 0.0, "dp": null}', 'true', '', 3)
    """
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, dict | list):
        return json.dumps(x, allow_nan=False)
    return "" if x is None else x


def _csv(rows: list[list[object]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for r in rows:
        w.writerow([_cell(c) for c in r])
    return buf.getvalue()


def _g(x: float) -> str:
    return "" if not math.isfinite(x) else f"{tidy_float(x):.6g}"


def _staged(out_dir: Path, name: str) -> tuple[int, str]:
    """A new temporary file in ``out_dir`` for ``name``, created with mode 0666 less the umask.

    (``tempfile.mkstemp`` would make it 0600: results colleagues cannot read.)
    """
    for _ in range(100):
        tmp = str(out_dir / f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {name} in {out_dir}")


def write_files(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Write several files into ``out_dir`` so that a crash leaves the old results or the new ones.

    Every file is first written completely under a temporary name in ``out_dir``; only then are they
    renamed over the old ones (renames within a folder are atomic). A failure while writing leaves the
    old files untouched and removes the temporary ones. The files get the mode the umask leaves of
    0666 (0644 under the usual umask 022), as any file an editor would write.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    staged: list[tuple[str, Path]] = []
    try:
        for name, text in files.items():
            fd, tmp = _staged(out_dir, name)
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
    used = (  # columns of the links that carried traffic
        np.flatnonzero(np.nansum(s.link_utilization, axis=0) > 0)
        if s.link_utilization.size
        else np.zeros(0, int)
    )
    rows = [["t_s", "link", "src", "dst", "kind", "utilization", "gpu_intensity"]]
    for k, t in enumerate(s.t.tolist()):
        for col in used.tolist():
            lid = int(s.link_ids[col])
            lk = topology.links[lid]
            u = float(s.link_utilization[k, col])
            rows.append(
                [f"{t:.6g}", lid, lk.src, lk.dst, lk.kind, _g(u), _g(float(s.link_intensity[k, col]))]
            )
    files["links.csv"] = _csv(rows)
    return write_files(out_dir, files)


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


def _read_cell(text: str) -> float:
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
            out[c].append(_read_cell(row[c]))
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
            "t_s": _read_cell(r["t_s"]),
            "link": int(r["link"]),
            "src": r["src"],
            "dst": r["dst"],
            "kind": r["kind"],
            "utilization": _read_cell(r["utilization"]),
            "gpu_intensity": _read_cell(r["gpu_intensity"]),
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
