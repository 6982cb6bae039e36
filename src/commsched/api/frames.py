"""Results as pandas DataFrames (extra ``pandas``), from memory or from what the command line wrote.

The frames have the columns of the CSV files ``commsched simulate --out`` writes, so a frame built
from a :class:`~commsched.sim.results.records.SimResult` and one read back from its output directory agree
(up to the six significant digits of the CSV time series).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from commsched.errors import InputError
from commsched.sim.results.comparison import Comparison, comparison_json
from commsched.sim.results.records import SimResult
from commsched.topology import Topology

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ResultFrames", "comparison_frame", "read_comparison", "read_result", "result_frames"]

_LINK_COLUMNS = ["t_s", "link", "src", "dst", "kind", "utilization", "gpu_intensity"]


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise InputError(
            "pandas is not installed", where="DataFrame results", expected="pip install 'commsched[pandas]'"
        ) from None
    return pandas


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ResultFrames:
    """One simulation as DataFrames.

    Attributes
    ----------
    summary
        The ``simulate --json`` object without ``jobs`` (policy, mode, seed, utilisation, ...).
    jobs
        One row per job, indexed by ``id`` (the columns of ``jobs.csv``).
    utilization
        The utilisation time series: ``t_s``, ``gpu_utilization``, ``allocated_gpu_utilization``.
    links
        Per sample and per link that carried traffic: ``t_s``, ``link``, (``src``, ``dst``, ``kind``
        when the topology is known), ``utilization``, ``gpu_intensity``.

    Examples
    --------
    >>> import commsched as cs
    >>> fr = cs.result_frames(cs.simulate("crux-fig19", policy="fair", mode="fast"))
    >>> (fr.summary["policy"], len(fr.jobs), list(fr.links.columns)[:2])
    ('fair', 4, ['t_s', 'link'])
    """

    summary: dict[str, Any]
    jobs: pd.DataFrame
    utilization: pd.DataFrame
    links: pd.DataFrame


def _flat_job(row: dict[str, Any]) -> dict[str, Any]:
    """A job's row with its fabric bytes per group kind as columns ``fabric_bytes_tp`` ..."""
    out = {k: v for k, v in row.items() if k != "fabric_bytes_per_iteration"}
    for kind, value in (row.get("fabric_bytes_per_iteration") or {}).items():
        out[f"fabric_bytes_{kind}"] = value
    return out


def _jobs_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    pd_ = _pandas()
    frame: pd.DataFrame = pd_.DataFrame.from_records([_flat_job(r) for r in rows])
    if frame.empty:
        return frame
    for col in frame.columns:
        if col not in ("id", "finished", "shared_links", "gpus", "priority_class"):
            frame[col] = frame[col].astype("float64")  # None (unknown) -> NaN
    return frame.set_index("id")


def result_frames(result: SimResult, topology: Topology | None = None) -> ResultFrames:
    """A simulation's jobs, utilisation series and link load as DataFrames.

    Parameters
    ----------
    result
        What :func:`commsched.simulate` returned.
    topology
        The cluster simulated (``scenario.topology``); gives the links' ``src``, ``dst`` and ``kind``.

    Examples
    --------
    >>> import commsched as cs
    >>> sc = cs.load_scenario("crux-fig19")
    >>> fr = cs.result_frames(cs.simulate(sc, policy="crux-full", mode="fast"), sc.topology)
    >>> list(fr.jobs.index)
    ['gpt', 'bert1', 'bert2', 'bert3']
    >>> list(fr.utilization.columns)
    ['t_s', 'gpu_utilization', 'allocated_gpu_utilization']
    >>> bool((fr.links["utilization"] <= 1 + 1e-9).all())
    True
    """
    from commsched.io.results import result_summary

    pd_ = _pandas()
    summary = result_summary(result, include_wall_time=True)
    jobs = _jobs_frame(summary.pop("jobs"))
    s = result.series
    util = pd_.DataFrame(
        {
            "t_s": s.t.astype("float64"),
            "gpu_utilization": s.gpu_utilization.astype("float64"),
            "allocated_gpu_utilization": s.allocated_gpu_utilization.astype("float64"),
        }
    )
    used = (  # columns of the links that carried traffic
        np.flatnonzero(np.nansum(s.link_utilization, axis=0) > 0)
        if s.link_utilization.size
        else np.zeros(0, int)
    )
    rows: list[dict[str, Any]] = []
    for k, t in enumerate(s.t.tolist()):
        for col in used.tolist():
            lid = int(s.link_ids[col])
            row: dict[str, Any] = {"t_s": float(t), "link": lid}
            if topology is not None:
                lk = topology.links[lid]
                row.update(src=str(lk.src), dst=str(lk.dst), kind=str(lk.kind))
            row["utilization"] = float(s.link_utilization[k, col])
            row["gpu_intensity"] = float(s.link_intensity[k, col])
            rows.append(row)
    cols = (
        _LINK_COLUMNS
        if topology is not None
        else [c for c in _LINK_COLUMNS if c not in ("src", "dst", "kind")]
    )
    links = pd_.DataFrame.from_records(rows, columns=cols)
    return ResultFrames(summary=summary, jobs=jobs, utilization=util, links=links)


def read_result(out_dir: str | Path) -> ResultFrames:
    """Read back the directory ``commsched simulate --out DIR`` wrote, as DataFrames.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import commsched as cs
    >>> from commsched.io.results import write_outputs
    >>> sc = cs.load_scenario("crux-fig19")
    >>> r = cs.simulate(sc, policy="crux-full", mode="fast")
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = write_outputs(r, sc.topology, d)
    >>> back = cs.read_result(d)
    >>> from commsched.io.numbers import tidy_float
    >>> back.summary["gpu_utilization"] == tidy_float(r.gpu_utilization)  # written to 12 digits
    True
    >>> list(back.jobs.index) == list(cs.result_frames(r).jobs.index)
    True
    """
    from commsched.io.results import read_links, read_summary, read_utilization

    pd_ = _pandas()
    d = Path(out_dir)
    summary = dict(read_summary(d))
    jobs = _jobs_frame(list(summary.pop("jobs", [])))
    util = pd_.DataFrame(read_utilization(d))
    links = pd_.DataFrame.from_records(read_links(d), columns=_LINK_COLUMNS)
    return ResultFrames(summary=summary, jobs=jobs, utilization=util, links=links)


def _flat(name: str, vals: dict[str, Any]) -> dict[str, Any]:
    """One row: nested figures (e.g. the ``throughput_loss`` distribution) become ``outer_inner`` columns;
    per-job lists (``job_results``) are not figures of the policy and stay out."""
    row: dict[str, Any] = {"policy": name}
    for key, val in vals.items():
        if isinstance(val, list):
            continue
        if isinstance(val, dict):
            row.update({f"{key}_{inner}": v for inner, v in val.items()})
        else:
            row[key] = val
    return row


def _comparison_rows(obj: dict[str, Any]) -> pd.DataFrame:
    pd_ = _pandas()
    rows = [_flat(name, vals) for name, vals in obj["policies"].items()]
    frame: pd.DataFrame = pd_.DataFrame.from_records(rows)
    if frame.empty:
        return frame
    for col in frame.columns:
        if col not in ("policy", "finished_jobs", "jobs") and not col.endswith(("_jobs", "_over_50pct")):
            frame[col] = frame[col].astype("float64")
    return frame.set_index("policy")


def comparison_frame(cmp: Comparison) -> pd.DataFrame:
    """One row per policy of a comparison (the figures of ``compare --json``), indexed by policy.

    Examples
    --------
    >>> import commsched as cs
    >>> df = cs.comparison_frame(cs.compare("crux-fig19", ["ecmp-fair", "crux-full"], mode="fast"))
    >>> list(df.index)
    ['ecmp-fair', 'crux-full']
    >>> "gpu_utilization" in df.columns and "avg_jct_s" in df.columns
    True
    >>> "throughput_loss_p95" in df.columns  # the loss distribution, one column per figure
    True
    """
    return _comparison_rows(comparison_json(cmp))


def read_comparison(path: str | Path) -> pd.DataFrame:
    """Read back the ``compare.json`` that ``commsched compare --out DIR`` wrote (file or directory).

    Examples
    --------
    >>> import json, math, tempfile
    >>> from pathlib import Path
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "compare.json").write_text(json.dumps(
    ...     {"scenario": "s", "policies": {"fair": {"gpu_utilization": 0.5, "avg_jct_s": None}}}))
    >>> df = read_comparison(d)
    >>> float(df.loc["fair", "gpu_utilization"]), bool(math.isnan(df.loc["fair", "avg_jct_s"]))
    (0.5, True)
    """
    from commsched.io.results import read_comparison as read_json

    return _comparison_rows(read_json(Path(path)))
