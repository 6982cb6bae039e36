"""Pictures of a comparison (matplotlib, imported lazily; the ``plot`` extra).

* ``utilization.png``: average GPU utilisation per policy (bar chart, Crux Fig. 23 style).
* ``utilization_over_time.png``: GPU utilisation over time per policy.
* ``jct_cdf.png``: CDF of job completion times per policy (seconds; a line style and marker each).
* ``link_intensity.png``: the GPU intensity of the traffic over time on the few most loaded links,
  labelled by their endpoints, one panel per policy (Crux Fig. 24; :mod:`commsched.experiments.plot_links`).
* ``throughput_loss.png``: throughput loss against the ideal iteration of the worst job and of the
  lowest-priority jobs per policy (Crux §7.2); a zero bar says so.
* ``who_pays.png``: the jobs most slowed and most sped up against the baseline (the first policy).

Every figure is built by a ``*_figure(plt, cmp, ...)`` function that returns it (so that its titles and
labels can be read back) and written by :func:`write_plots`; each has a title and axis labels with units.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from commsched.sim.results.comparison import Comparison, throughput_loss
from commsched.topology import Topology

__all__ = [
    "jct_cdf_figure",
    "loss_figure",
    "over_time_figure",
    "utilization_figure",
    "write_plots",
]


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_plots(cmp: Comparison, topology: Topology, out_dir: Path) -> list[Path]:
    """Write every picture of a comparison into ``out_dir``; return their paths."""
    from commsched.experiments.plot_links import link_intensity_figure, who_pays_figure

    out_dir.mkdir(parents=True, exist_ok=True)
    plt = _plt()
    figures = [
        ("utilization", utilization_figure(plt, cmp)),
        ("utilization_over_time", over_time_figure(plt, cmp)),
        ("jct_cdf", jct_cdf_figure(plt, cmp)),
        ("link_intensity", link_intensity_figure(plt, cmp, topology)),
        ("throughput_loss", loss_figure(plt, cmp)),
        ("who_pays", who_pays_figure(plt, cmp)),
    ]
    return [_save(plt, fig, out_dir / f"{name}.png") for name, fig in figures]


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def utilization_figure(plt: Any, cmp: Comparison) -> Any:
    """Average GPU utilisation per policy, each bar labelled with its value."""
    fig, ax = plt.subplots(figsize=(1.8 + 1.1 * len(cmp.summaries), 4.0), layout="constrained")
    names = [s.policy for s in cmp.summaries]
    vals = [s.gpu_utilization for s in cmp.summaries]
    bars = ax.bar(names, vals, color="#4c72b0")
    for b, v in zip(bars, vals, strict=True):
        ax.annotate(f"{v:.3f}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=8)
    ax.set_xlabel("policy")
    ax.set_ylabel("GPU utilisation (busy / all GPUs, 0-1)")
    ax.set_ylim(0, max([*vals, 0.01]) * 1.15)
    ax.set_title(f"{cmp.scenario}: average GPU utilisation")
    ax.tick_params(axis="x", rotation=30)
    return fig


def _legend(ax: Any, **kwargs: Any) -> bool:
    """Draw the legend of ``ax`` if it has labelled artists (else matplotlib warns); whether it drew one."""
    handles, _labels = ax.get_legend_handles_labels()
    if not handles:
        return False
    ax.legend(**kwargs)
    return True


def over_time_figure(plt: Any, cmp: Comparison) -> Any:
    """GPU utilisation over time, one line per policy."""
    fig, ax = plt.subplots(figsize=(8, 4.0), layout="constrained")
    for i, r in enumerate(cmp.results):
        t = r.series.t / 3600.0
        ax.plot(
            t, r.series.gpu_utilization, label=r.policy, lw=1, linestyle=_LINESTYLES[i % len(_LINESTYLES)]
        )
    ax.set_xlabel("simulated time (h)")
    ax.set_ylabel("GPU utilisation (busy / all GPUs, 0-1)")
    _legend(ax, fontsize=7, ncol=2)
    ax.set_title(f"{cmp.scenario}: GPU utilisation over time")
    return fig


#: line styles and markers cycled over policies, so that curves lying on one another stay visible
_LINESTYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "v", "D", "x", "+", "*")


def jct_cdf_figure(plt: Any, cmp: Comparison) -> Any:
    """The CDF of job completion times per policy, in seconds as in the tables.

    Each policy has its own line style and marker (markers at up to 8 points of the curve) and the lines
    are half transparent, so that policies with equal JCTs, drawn on top of one another, all show; the
    legend gives each policy's count of finished jobs.
    """
    fig, ax = plt.subplots(figsize=(7, 4.0), layout="constrained")
    for i, r in enumerate(cmp.results):
        jct = np.sort([j.jct_s for j in r.jobs if j.finished and math.isfinite(j.jct_s)])
        if jct.size:
            ax.step(
                jct,
                np.arange(1, jct.size + 1) / jct.size,
                where="post",
                label=f"{r.policy} ({jct.size} finished)",
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
    ax.set_ylabel("fraction of the finished jobs")
    ax.set_title(f"{cmp.scenario}: job completion times (CDF)")
    if not _legend(ax, fontsize=7):
        ax.text(
            0.5, 0.5, "no job finished within the horizon", ha="center", va="center", transform=ax.transAxes
        )
    return fig


def _lowest_class_loss(cmp: Comparison) -> list[float]:
    """Per policy: the mean throughput loss (against the ideal) of its lowest-priority started jobs."""
    out = []
    for r in cmp.results:
        started = [j for j in r.jobs if j.start_s is not None]
        lowest = max((j.priority_class for j in started), default=0)
        low = [
            max(0.0, 1 - j.reference_iteration_s / j.mean_iteration_s)
            for j in started
            if j.priority_class == lowest and math.isfinite(j.mean_iteration_s) and j.mean_iteration_s > 0
        ]
        out.append(float(np.mean(low)) if low else 0.0)
    return out


#: a loss below this is drawn as a zero bar, labelled "0 (no loss)"
ZERO_LOSS = 5e-4


def loss_figure(plt: Any, cmp: Comparison) -> Any:
    """Throughput loss (``1 - ideal / iteration time``) of the worst job and the lowest class's mean, per
    policy; every bar carries its value, and a zero bar says "0 (no loss)"."""
    fig, ax = plt.subplots(figsize=(2.0 + 1.3 * len(cmp.results), 4.2), layout="constrained")
    names = [r.policy for r in cmp.results]
    worst = [max(ls) if (ls := throughput_loss(r)) else 0.0 for r in cmp.results]
    low_mean = _lowest_class_loss(cmp)
    x = np.arange(len(names))
    for offset, vals, label in ((-0.2, low_mean, "lowest class, mean"), (0.2, worst, "worst job")):
        bars = ax.bar(x + offset, vals, 0.4, label=label)
        for b, v in zip(bars, vals, strict=True):
            text = "0 (no loss)" if v < ZERO_LOSS else f"{v:.2f}"
            ax.annotate(
                text,
                (b.get_x() + b.get_width() / 2, v),
                ha="center",
                va="bottom",
                fontsize=7,
                rotation=90 if v < ZERO_LOSS else 0,
            )
    ax.set_xticks(x, names, rotation=30)
    ax.set_xlabel("policy")
    ax.set_ylabel("throughput loss (1 - ideal / iteration time)")
    ax.set_ylim(0, max([*worst, *low_mean, 0.05]) * 1.35)
    ax.set_title(f"{cmp.scenario}: throughput loss against each job's ideal iteration")
    _legend(ax, fontsize=7)
    return fig
