"""The link-intensity and who-pays pictures of a comparison (see :mod:`commsched.experiments.plots`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from commsched.sim.results.comparison import Comparison
from commsched.sim.results.records import SimResult
from commsched.topology import Topology

__all__ = ["TOP_JOBS", "TOP_LINKS", "busiest_links", "link_intensity_figure", "who_pays_figure"]

#: links shown in the link-intensity figure (the most loaded)
TOP_LINKS = 8
#: jobs shown each way in the who-pays figure
TOP_JOBS = 8


def _mean_utilization(r: SimResult) -> dict[int, float]:
    s = r.series
    if not s.t.size or not s.link_ids.size:
        return {}
    mean = np.nanmean(s.link_utilization, axis=0) if s.link_utilization.size else np.zeros(0)
    return {
        int(lid): float(u) for lid, u in zip(s.link_ids.tolist(), np.nan_to_num(mean).tolist(), strict=True)
    }


def busiest_links(cmp: Comparison, top: int = TOP_LINKS) -> list[int]:
    """The ``top`` links of highest mean utilisation under any policy (most loaded first, ties by id)."""
    best: dict[int, float] = {}
    for r in cmp.results:
        for lid, u in _mean_utilization(r).items():
            best[lid] = max(best.get(lid, 0.0), u)
    order = sorted((lid for lid, u in best.items() if u > 0), key=lambda lid: (-best[lid], lid))
    return order[:top]


def _rows(r: SimResult, links: list[int]) -> NDArray[np.float64]:
    """Intensity over time of ``links`` under ``r`` (rows: links; NaN where idle or never used)."""
    s = r.series
    out = np.full((len(links), s.t.size), np.nan)
    col = {int(lid): k for k, lid in enumerate(s.link_ids.tolist())}
    for i, lid in enumerate(links):
        if lid in col:
            out[i] = s.link_intensity[:, col[lid]]
    return out


def link_intensity_figure(plt: Any, cmp: Comparison, topology: Topology, top: int = TOP_LINKS) -> Any:
    """The GPU intensity of the traffic over time on the ``top`` most loaded links, labelled by their
    endpoints, one panel per policy with the same links in the same rows."""
    links = busiest_links(cmp, top)
    n = max(len(cmp.results), 1)
    fig, axes = plt.subplots(
        n, 1, figsize=(9, 1.2 + (0.9 + 0.22 * max(len(links), 1)) * n), squeeze=False, layout="constrained"
    )
    fig.suptitle(f"{cmp.scenario}: GPU intensity of the traffic on the {len(links)} most loaded links")
    if not links:
        ax = axes[0][0]
        ax.set_title("no link carried traffic")
        ax.set_xlabel("simulated time (h)")
        ax.set_ylabel("link (source -> destination)")
        return fig
    from matplotlib.colors import LogNorm, Normalize

    values = np.concatenate([_rows(r, links).ravel() for r in cmp.results])
    values = values[np.isfinite(values) & (values > 0)]
    vmax = float(values.max()) if values.size else 1.0
    vmin = float(values.min()) if values.size else vmax / 10.0
    # intensities span orders of magnitude (one job's against another's): a log scale keeps them all
    # readable when they do, a linear one otherwise
    norm = LogNorm(vmin=vmin, vmax=vmax) if vmax > 10.0 * vmin else Normalize(vmin=0.0, vmax=vmax)
    labels = [f"{topology.links[lid].src} -> {topology.links[lid].dst}" for lid in links]
    image = None
    for k, r in enumerate(cmp.results):
        ax = axes[k][0]
        rows = _rows(r, links)
        end_h = float(r.series.t[-1]) / 3600.0 if r.series.t.size else 1.0
        image = ax.imshow(
            np.ma.masked_invalid(rows),
            aspect="auto",
            interpolation="nearest",
            cmap="viridis",
            norm=norm,
            extent=(0, end_h, len(links) - 0.5, -0.5),
        )
        ax.set_yticks(range(len(links)), labels, fontsize=7)
        ax.set_title(r.policy, fontsize=9, loc="left")
        ax.set_ylabel("link (source -> destination)", fontsize=7)
        ax.set_xlabel("simulated time (h)", fontsize=8)
    if image is not None:
        fig.colorbar(
            image, ax=axes, shrink=0.8, label="GPU intensity of the traffic (Crux I = W / t; blank: idle)"
        )
    return fig


def _headline_policy(cmp: Comparison) -> str | None:
    """The policy of highest GPU utilisation other than the baseline (``None`` with one policy)."""
    others = cmp.summaries[1:]
    if not others:
        return None
    return max(others, key=lambda s: s.gpu_utilization).policy


def who_pays_figure(plt: Any, cmp: Comparison, top: int = TOP_JOBS) -> Any:
    """The ``top`` jobs most slowed and most sped up under the best policy against the baseline: their
    iteration-time ratio (log scale), labelled with GPUs, model and class under each policy."""
    policy = _headline_policy(cmp)
    fig, ax = plt.subplots(figsize=(9, 1.6 + 0.32 * 2 * top), layout="constrained")
    ax.set_xlabel(f"iteration time against {cmp.baseline} (x, log scale; right of 1: slower)")
    ax.set_ylabel("job (GPUs, model, class baseline -> policy)")
    if policy is None:
        ax.set_title(f"{cmp.scenario}: who pays (one policy only, nothing to compare)")
        return fig
    shifts = cmp.who_pays(policy)
    slowed = [x for x in shifts if x.ratio > 1.001][:top]
    faster = [x for x in reversed(shifts) if x.ratio < 0.999][:top][::-1]
    ax.set_title(f"{cmp.scenario}: who pays under {policy} against {cmp.baseline}")
    rows = [*slowed, *faster]
    if not rows:
        ax.text(0.5, 0.5, "every job iterates at the baseline's pace", ha="center", va="center",
                transform=ax.transAxes)  # fmt: skip
        return fig
    y = np.arange(len(rows))
    ratios = np.array([x.ratio for x in rows])
    colors = ["#c44e52" if v > 1 else "#55a868" for v in ratios]
    ax.barh(y, np.log2(ratios), color=colors)
    ax.set_yticks(
        y, [f"{x.id} ({x.gpus} GPUs, {x.model}, class {x.class_baseline} -> {x.class_policy})" for x in rows],
        fontsize=7,
    )  # fmt: skip
    ax.invert_yaxis()
    ax.axvline(0.0, color="black", lw=0.8)
    span = float(np.abs(np.log2(ratios)).max()) or 1.0
    ax.set_xlim(-span * 1.45 if faster else -span * 0.1, span * 1.45 if slowed else span * 0.1)
    ticks = np.arange(-np.ceil(span), np.ceil(span) + 1)
    ax.set_xticks(ticks, [f"{2.0**t:g}" for t in ticks])
    for yi, x in zip(y, rows, strict=True):
        v = float(np.log2(x.ratio))
        ax.annotate(
            f"{x.ratio:.2f}x, {x.gpu_hours_gained:+.1f} GPU-h",
            (v, yi),
            ha="left" if v > 0 else "right",
            va="center",
            fontsize=7,
            xytext=(3 if v > 0 else -3, 0),
            textcoords="offset points",
        )
    return fig
