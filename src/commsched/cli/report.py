"""The operator's answer printed under a comparison: the headline sentence and who pays.

Both read the ``compare --json`` object only (:func:`commsched.sim.results.comparison.comparison_json`).
"""

from __future__ import annotations

import math
from typing import Any

from rich.table import Table

__all__ = ["TOP", "gpu_time_table", "headline", "who_pays_table"]

#: jobs shown each way (most slowed, most sped up) in the who-pays table
TOP = 5
#: iteration-time ratios within this of 1 are "the same pace" (neither slowed nor sped up)
SAME = 1e-3


def _names(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``.

    Examples
    --------
    >>> _names(["a"]), _names(["a", "b"]), _names(["a", "b", "c"])
    ('a', 'a and b', 'a, b and c')
    """
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _best_group(obj: dict[str, Any]) -> list[str]:
    """The policy of highest utilisation with the policies tied with it (in the order listed)."""
    pols = obj["policies"]
    best = max(pols, key=lambda p: pols[p]["gpu_utilization"] or 0.0)
    for group in obj.get("ties") or []:
        if best in group:
            return [p for p in pols if p in group]
    return [best]


def _payer(obj: dict[str, Any], policy: str) -> dict[str, Any] | None:
    rows = (obj.get("who_pays") or {}).get(policy) or []
    return rows[0] if rows and rows[0]["iteration_ratio"] > 1.0 + SAME else None


def headline(obj: dict[str, Any]) -> str | None:
    """The answer in one paragraph: GPU-hours recovered against the baseline (the first policy), tied
    policies named as tied, the job that pays most, and the JCT change with the jobs finished under each.

    Examples
    --------
    >>> def pol(u, h, jct, done):
    ...     return {"gpu_utilization": u, "gpu_hours": h, "avg_jct_s": jct, "finished_jobs": done}
    >>> pols = {"ecmp-fair": pol(0.405, 829.4, 1488.7, 87), "taccl-star": pol(0.4761, 975.0, 1500.0, 90),
    ...         "crux-full": pol(0.4763, 975.4, 1500.6, 90)}
    >>> payer = {"id": "syn-43", "gpus": 64, "model": "bert", "class_baseline": 0, "class_policy": 2,
    ...          "iteration_ratio": 5.5, "gpu_hours_gained": -3.1}
    >>> obj = {"baseline": "ecmp-fair", "ties": [["crux-full", "taccl-star"]], "policies": pols,
    ...        "recovered_gpu_hours": {"ecmp-fair": 0.0, "taccl-star": 145.6, "crux-full": 146.0},
    ...        "recovered_pct": {"ecmp-fair": 0.0, "taccl-star": 17.6, "crux-full": 17.6},
    ...        "who_pays": {"crux-full": [payer]}}
    >>> print(headline(obj))  # doctest: +NORMALIZE_WHITESPACE
    taccl-star and crux-full (tied: GPU utilisation within 0.0005) recover 145.6-146.0 GPU-hours (+17.6 %)
    over ecmp-fair (GPU utilisation 0.476 against 0.405). The job that pays most under crux-full is syn-43
    (64 GPUs, bert, class 0 -> 2): 5.5x slower than under ecmp-fair (-3.1 GPU-hours). Average JCT 1500.6 s
    against 1488.7 s (+0.8 %), with 90 jobs finished against 87.
    """
    pols = obj["policies"]
    if len(pols) < 2:
        return None
    base = obj.get("baseline") or next(iter(pols))
    group = _best_group(obj)
    rec = obj.get("recovered_gpu_hours") or {}
    pct = obj.get("recovered_pct") or {}
    u0 = pols[base]["gpu_utilization"] or 0.0
    lead = _lead(obj)
    u = pols[lead]["gpu_utilization"] or 0.0
    tied = " (tied: GPU utilisation within 0.0005)" if len(group) > 1 else ""
    if base in group or rec.get(lead, 0.0) <= 0:
        others = [p for p in group if p != base]
        text = f"No policy recovers GPU time over {base} (GPU utilisation {u0:.3f})"
        text += f"; tied with it: {_names(others)}." if others else "."
        return text
    lo, hi = min(rec.get(p, 0.0) for p in group), max(rec.get(p, 0.0) for p in group)
    amount = f"{hi:.1f}" if abs(hi - lo) < 0.05 else f"{lo:.1f}-{hi:.1f}"
    verb = "recover" if len(group) > 1 else "recovers"
    share = f" ({pct[lead]:+.1f} %)" if pct.get(lead) is not None else ""
    text = (
        f"{_names(group)}{tied} {verb} {amount} GPU-hours{share} over {base} "
        f"(GPU utilisation {u:.3f} against {u0:.3f})."
    )
    payer = _payer(obj, lead)
    if payer is not None:
        text += (
            f" The job that pays most under {lead} is {payer['id']} ({payer['gpus']} GPUs, {payer['model']}, "
            f"class {payer['class_baseline']} -> {payer['class_policy']}): {payer['iteration_ratio']:.1f}x "
            f"slower than under {base} ({payer['gpu_hours_gained']:+.1f} GPU-hours)."
        )
    else:
        text += f" No job iterates slower under {lead} than under {base}."
    jct, jct0 = pols[lead].get("avg_jct_s"), pols[base].get("avg_jct_s")
    if jct is not None and jct0 and math.isfinite(jct) and math.isfinite(jct0):
        text += (
            f" Average JCT {jct:.1f} s against {jct0:.1f} s ({100 * (jct / jct0 - 1):+.1f} %), with "
            f"{pols[lead].get('finished_jobs')} jobs finished against {pols[base].get('finished_jobs')}."
        )
    return text


def who_pays_table(obj: dict[str, Any], policy: str | None = None, top: int = TOP) -> Table | None:
    """The ``top`` jobs most slowed and most sped up under ``policy`` (default: the headline's) against
    the baseline; ``None`` when there is nothing to show."""
    if policy is None:
        policy = _lead(obj)
    base = obj.get("baseline")
    rows = (obj.get("who_pays") or {}).get(policy) or []
    if not rows or policy == base:
        return None
    slowed = [r for r in rows if r["iteration_ratio"] > 1.0 + SAME][:top]
    faster = [r for r in reversed(rows) if r["iteration_ratio"] < 1.0 - SAME][:top]
    if not slowed and not faster:
        return None
    t = Table(title=f"who pays: {policy} against {base} (every job in compare.json)", header_style="bold")
    for col in ("", "job", "GPUs", "model", f"class {base} -> {policy}", "iteration x", "GPU-h gained"):
        t.add_column(col, justify="left" if col in ("", "job", "model") else "right", no_wrap=True)
    for label, part in (("slowed", slowed), ("faster", faster)):
        for k, r in enumerate(part):
            t.add_row(
                label if k == 0 else "",
                r["id"],
                str(r["gpus"]),
                r["model"],
                f"{r['class_baseline']} -> {r['class_policy']}",
                f"{r['iteration_ratio']:.2f}",
                _f(r["gpu_hours_gained"], 2, sign=True),
            )
    return t


def _f(x: float | None, digits: int = 1, *, sign: bool = False) -> str:
    """A figure to ``digits`` decimals; one that rounds to zero is written without a sign.

    Examples
    --------
    >>> _f(-0.04), _f(-0.04, sign=True), _f(2.345, sign=True), _f(None)
    ('0.0', '0.0', '+2.3', '-')
    """
    if x is None or not math.isfinite(x):
        return "-"
    if abs(x) < 0.5 * 10**-digits:
        return f"{0.0:.{digits}f}"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def gpu_time_table(obj: dict[str, Any]) -> Table:
    """Per policy: useful GPU-hours, GPU-hours lost against the ideal, and recovered over the baseline
    (in all, in %, and per job size band)."""
    from commsched.sim.results.gputime import SIZE_BANDS

    base = obj.get("baseline")
    t = Table(title=f"GPU time (GPU-hours; recovered over {base})", header_style="bold")
    bands = [name for name, _, _ in SIZE_BANDS]
    for col in ("policy", "useful", "lost", "recovered", "%", *(f"{b} GPUs" for b in bands)):
        t.add_column(col, justify="left" if col == "policy" else "right", no_wrap=True)
    rec = obj.get("recovered_gpu_hours") or {}
    pct = obj.get("recovered_pct") or {}
    by_size = obj.get("recovered_by_size") or {}
    for name, v in obj["policies"].items():
        if name == base:
            cells = ["baseline", "", *("" for _ in bands)]
        else:
            sizes = by_size.get(name) or {}
            cells = [
                _f(rec.get(name, 0.0), sign=True),
                _f(pct.get(name), sign=True),
                *(_f(sizes.get(b, 0.0), sign=True) for b in bands),
            ]
        t.add_row(name, _f(v.get("gpu_hours")), _f(v.get("gpu_hours_lost")), *cells)
    lead = _lead(obj)
    by_class = (obj.get("recovered_by_class") or {}).get(lead) or {}
    if by_class:
        parts = ", ".join(f"class {c} {_f(v, sign=True)}" for c, v in by_class.items())
        t.caption = f"{lead}, recovered per class under {base}: {parts}"
    return t


def _lead(obj: dict[str, Any]) -> str:
    """The policy the headline speaks of: the one of the best group that recovers most."""
    rec = obj.get("recovered_gpu_hours") or {}
    return max(_best_group(obj), key=lambda p: rec.get(p, 0.0))
