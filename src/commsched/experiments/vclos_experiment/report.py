"""Outputs of the vClos large-scale experiments: Table 5, the JSON of Figs. 12-13, and the figures.

See :mod:`commsched.experiments.vclos_experiment`.

References
----------
vClos §9.4-9.6 (Figs. 12-13, Table 5).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from commsched.experiments.vclos_experiment.runs import PolicyRun

__all__ = ["experiment_json", "plot_experiment", "table5"]


def _num(x: float) -> float | None:
    return round(float(x), 3) if math.isfinite(x) else None


def _share(x: float) -> float | None:
    return round(float(x), 5) if math.isfinite(x) else None


def table5(runs: Sequence[PolicyRun]) -> dict[str, dict[str, float | None]]:
    """Table 5: average JCT (s) by lambda (rows) and policy (columns)."""
    out: dict[str, dict[str, float | None]] = {}
    for r in runs:
        out.setdefault(f"{r.mean_gap_s:g}", {})[r.policy] = _num(r.times.jct_s)
    return out


def experiment_json(scenario: str, runs: Sequence[PolicyRun]) -> dict[str, Any]:
    """Everything the figures need: Table 5, per-run averages (Fig. 13), stability and fragmentation
    (Fig. 12d, Table 2), JWT quantiles (Fig. 12a) and the time-averaged queue depth (Fig. 12c)."""
    qs = (0.5, 0.9, 0.99, 1.0)
    return {
        "scenario": scenario,
        "table5_avg_jct_s": table5(runs),
        "runs": [
            {
                "policy": r.policy,
                "lambda_s": r.mean_gap_s,
                "avg_jrt_s": _num(r.times.jrt_s),
                "avg_jwt_s": _num(r.times.jwt_s),
                "avg_jct_s": _num(r.times.jct_s),
                "finished": r.times.finished,
                "jobs": r.times.jobs,
                "stability_s": _num(r.stability_s),
                "stability_by_gpus_s": {str(k): _num(v) for k, v in r.stability_by_gpus.items()},
                "avg_jrt_by_gpus_s": {str(k): _num(v) for k, v in r.jrt_by_gpus.items()},
                "avg_jwt_by_gpus_s": {str(k): _num(v) for k, v in r.jwt_by_gpus.items()},
                "offered_load": _num(r.offered_load),
                "multi_leaf_share": _share(r.contention.multi_leaf),
                "gpu_time_lost_to_contention": _share(r.contention.gpu_time_lost),
                "fragmentation": {
                    "gpu_total": r.fragmentation.gpu_total,
                    "gpu_shape": r.fragmentation.gpu_shape,
                    "network": r.fragmentation.network,
                },
                "jwt_quantiles_s": {
                    f"p{int(q * 100)}": _num(float(np.quantile(r.waits_s, q))) if r.waits_s else None
                    for q in qs
                },
                "avg_queue_depth": _num(r.queue.time_average()),
                "max_queue_depth": int(r.queue.depth.max()) if r.queue.depth.size else 0,
                "wall_s": round(r.wall_s, 2),
            }
            for r in runs
        ],
    }


def plot_experiment(runs: Sequence[PolicyRun], out_dir: str) -> list[str]:
    """Fig. 12a (JWT CDF), Fig. 12c (queue depth), Fig. 12d (stability by GPUs) and Fig. 13 (averages)
    for the first lambda, as PNG files in ``out_dir`` (matplotlib imported here, lazily)."""
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    lam = runs[0].mean_gap_s
    sel = [r for r in runs if r.mean_gap_s == lam]
    files = []
    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    for r in sel:
        w = np.array(r.waits_s)
        ax[0, 0].plot(w, np.arange(1, w.size + 1) / max(w.size, 1), label=r.policy)
        ax[0, 1].step(r.queue.t_s, r.queue.depth, where="post", label=r.policy)
        ks = sorted(r.stability_by_gpus)
        ax[1, 0].plot([str(k) for k in ks], [r.stability_by_gpus[k] for k in ks], marker="o", label=r.policy)
    ax[0, 0].set(xscale="symlog", xlabel="JWT (s)", ylabel="CDF", title="(a) JWT")
    ax[0, 1].set(xlabel="time (s)", ylabel="waiting jobs", title="(c) queue depth")
    ax[1, 0].set(xlabel="GPUs", ylabel="JCT std (s)", title="(d) stability")
    names = [r.policy for r in sel]
    x = np.arange(len(names))
    for i, (lbl, vals) in enumerate(
        (
            ("JRT", [r.times.jrt_s for r in sel]),
            ("JWT", [r.times.jwt_s for r in sel]),
            ("JCT", [r.times.jct_s for r in sel]),
        )
    ):
        ax[1, 1].bar(x + (i - 1) * 0.27, vals, width=0.27, label=lbl)
    ax[1, 1].set_xticks(x, names, rotation=30)
    ax[1, 1].set(ylabel="seconds", title="Fig. 13: averages")
    for a in ax.ravel():
        a.legend(fontsize=7)
    fig.suptitle(f"vClos Figs. 12-13, lambda = {lam:g} s")
    fig.tight_layout()
    path = os.path.join(out_dir, f"vclos_fig12_13_lambda{lam:g}.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    files.append(path)
    return files
