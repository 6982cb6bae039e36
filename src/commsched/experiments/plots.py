"""Pictures of a comparison (matplotlib, imported lazily; the ``plot`` extra).

* ``utilization.png``: average GPU utilisation per policy (bar chart, Crux Fig. 23 style).
* ``utilization_over_time.png``: GPU utilisation over time per policy.
* ``jct_cdf.png``: CDF of job completion times per policy (seconds; a line style and marker each).
* ``link_intensity.png``: per-link GPU intensity of the traffic over time, by link kind (Crux Fig. 24).
* ``throughput_loss.png``: throughput loss of the lowest-priority jobs per policy (Crux §7.2).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from commsched.sim.comparison import Comparison, throughput_loss
from commsched.topology import LinkKind, Topology


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_plots(cmp: Comparison, topology: Topology, out_dir: Path) -> list[Path]:
    """Write every picture of a comparison into ``out_dir``; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plt = _plt()
    paths = [
        _bars(plt, cmp, out_dir / "utilization.png"),
        _over_time(plt, cmp, out_dir / "utilization_over_time.png"),
        _jct_cdf(plt, cmp, out_dir / "jct_cdf.png"),
        _intensity(plt, cmp, topology, out_dir / "link_intensity.png"),
        _loss(plt, cmp, out_dir / "throughput_loss.png"),
    ]
    return paths


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _bars(plt: Any, cmp: Comparison, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(cmp.summaries), 3.6))
    names = [s.policy for s in cmp.summaries]
    vals = [s.gpu_utilization for s in cmp.summaries]
    bars = ax.bar(names, vals, color="#4c72b0")
    for b, v in zip(bars, vals, strict=True):
        ax.annotate(f"{v:.3f}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("GPU utilisation (all GPUs)")
    ax.set_ylim(0, max([*vals, 0.01]) * 1.15)
    ax.set_title(f"{cmp.scenario}: average GPU utilisation")
    ax.tick_params(axis="x", rotation=30)
    return _save(plt, fig, path)


def _legend(ax: Any, **kwargs: Any) -> bool:
    """Draw the legend of ``ax`` if it has labelled artists (else matplotlib warns); whether it drew one."""
    handles, _labels = ax.get_legend_handles_labels()
    if not handles:
        return False
    ax.legend(**kwargs)
    return True


def _over_time(plt: Any, cmp: Comparison, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for r in cmp.results:
        t = r.series.t / 3600.0
        ax.plot(t, r.series.gpu_utilization, label=r.policy, lw=1)
    ax.set_xlabel("time (h)")
    ax.set_ylabel("GPU utilisation")
    _legend(ax, fontsize=7, ncol=2)
    ax.set_title("GPU utilisation over time")
    return _save(plt, fig, path)


#: line styles and markers cycled over policies, so that curves lying on one another stay visible
_LINESTYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "v", "D", "x", "+", "*")


def jct_cdf_figure(plt: Any, cmp: Comparison) -> Any:
    """The CDF of job completion times per policy, in seconds as in the tables.

    Each policy has its own line style and marker (markers at up to 8 points of the curve) and the lines
    are half transparent, so that policies with equal JCTs, drawn on top of one another, all show.
    """
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for i, r in enumerate(cmp.results):
        jct = np.sort([j.jct_s for j in r.jobs if j.finished and math.isfinite(j.jct_s)])
        if jct.size:
            ax.step(
                jct,
                np.arange(1, jct.size + 1) / jct.size,
                where="post",
                label=r.policy,
                lw=1.2,
                alpha=0.7,
                linestyle=_LINESTYLES[i % len(_LINESTYLES)],
                marker=_MARKERS[i % len(_MARKERS)],
                markevery=max(1, jct.size // 8),
                markersize=4,
                markerfacecolor="none",
            )
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("CDF")
    if not _legend(ax, fontsize=7):
        ax.text(
            0.5, 0.5, "no job finished within the horizon", ha="center", va="center", transform=ax.transAxes
        )
    return fig


def _jct_cdf(plt: Any, cmp: Comparison, path: Path) -> Path:
    return _save(plt, jct_cdf_figure(plt, cmp), path)


def _intensity(plt: Any, cmp: Comparison, topology: Topology, path: Path) -> Path:
    groups = [
        ("PCIe / NVLink", {LinkKind.PCIE, LinkKind.NVLINK}),
        ("NIC-ToR", {LinkKind.ACCESS}),
        ("ToR-Agg / fabric", {LinkKind.FABRIC, LinkKind.ABSTRACT}),
    ]
    results = cmp.results
    fig, axes = plt.subplots(len(groups), len(results), figsize=(2.6 * len(results) + 1, 7.5), squeeze=False)
    fig.subplots_adjust(hspace=0.55, top=0.88)
    kinds = np.array([lk.kind for lk in topology.links])
    vmax = 0.0
    for r in results:
        finite = r.series.link_intensity[np.isfinite(r.series.link_intensity)]
        vmax = max(vmax, float(finite.max()) if finite.size else 0.0)
    image = None
    for c, r in enumerate(results):
        s = r.series
        for g, (label, ks) in enumerate(groups):
            ax = axes[g][c]
            cols = np.flatnonzero(np.isin(kinds[s.link_ids], list(ks)))  # columns of links of these kinds
            used = cols[np.nansum(s.link_utilization[:, cols], axis=0) > 0] if cols.size else cols
            if used.size and s.t.size:
                data = s.link_intensity[:, used].T
                image = ax.imshow(
                    np.ma.masked_invalid(data),
                    aspect="auto",
                    interpolation="nearest",
                    cmap="viridis",
                    vmin=0,
                    vmax=vmax or 1,
                    extent=(0, float(s.t[-1]) / 3600.0, used.size, 0),
                )
            ax.set_title(f"{r.policy}\n{label}" if g == 0 else label, fontsize=8)
            ax.set_yticks([])
            if g == len(groups) - 1:
                ax.set_xlabel("time (h)", fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.6, label="GPU intensity of traffic")
    fig.suptitle("GPU intensity of the traffic on each link (rows: links)", fontsize=9)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _loss(plt: Any, cmp: Comparison, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(cmp.results), 3.6))
    names, worst, low_mean = [], [], []
    for r in cmp.results:
        names.append(r.policy)
        losses = throughput_loss(r)
        worst.append(max(losses) if losses else 0.0)
        started = [j for j in r.jobs if j.start_s is not None]
        lowest = max((j.priority_class for j in started), default=0)
        low = [
            max(0.0, 1 - j.standalone_iteration_s / j.mean_iteration_s)
            for j in started
            if j.priority_class == lowest and math.isfinite(j.mean_iteration_s) and j.mean_iteration_s > 0
        ]
        low_mean.append(float(np.mean(low)) if low else 0.0)
    x = np.arange(len(names))
    ax.bar(x - 0.2, low_mean, 0.4, label="lowest class, mean")
    ax.bar(x + 0.2, worst, 0.4, label="worst job")
    ax.set_xticks(x, names, rotation=30)
    ax.set_ylabel("throughput loss")
    _legend(ax, fontsize=7)
    return _save(plt, fig, path)
