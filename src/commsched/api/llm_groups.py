"""LLM jobs with parallel groups against the same jobs flattened to data parallelism.

:func:`grouped_vs_flat` simulates a scenario whose jobs declare TP/PP/DP/EP groups twice under each
policy: as written, and with every grouped job flattened (:func:`~commsched.workload.grouped_jobs.
flattened`: one ring all-reduce of the model's gradients over all its GPUs, the same per-GPU compute
without the pipeline bubble), as the model zoo describes such jobs. It reports, per variant and policy,
the GPU utilisation, the GPU-seconds lost to contention (each job's busy time short of what it would
compute at its standalone pace) and, per job, the bytes per iteration that reach the fabric by group kind.
:func:`write_llm_plots` draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from commsched.io.scenario import Scenario
from commsched.sim.results.records import SimResult
from commsched.workload.grouped_jobs import flattened

__all__ = ["LlmComparison", "LlmRow", "flat_scenario", "grouped_vs_flat", "write_llm_plots"]

KINDS = ("tp", "pp", "dp", "ep")


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmRow:
    """One simulation: variant (``grouped`` or ``flat``), policy and what it measured."""

    variant: str
    policy: str
    gpu_utilization: float
    contention_gpu_s: float
    mean_slowdown: float
    fabric_bytes: tuple[tuple[str, tuple[float, ...]], ...]  # job id -> bytes per kind (KINDS order)


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmComparison:
    """Every row of :func:`grouped_vs_flat`."""

    scenario: str
    rows: tuple[LlmRow, ...]

    def row(self, variant: str, policy: str) -> LlmRow:
        return next(r for r in self.rows if r.variant == variant and r.policy == policy)


def flat_scenario(scenario: Scenario) -> Scenario:
    """The scenario with every grouped job flattened to one data-parallel ring all-reduce.

    Examples
    --------
    >>> from commsched.io.shipped import resolve_scenario
    >>> flat = flat_scenario(resolve_scenario("llm-h200"))
    >>> [j.spec.parallel is None for j in flat.jobs]
    [True, True, True, True, True]
    """
    jobs = tuple(replace(j, spec=flattened(j.spec)) for j in scenario.jobs)
    return replace(scenario, jobs=jobs, name=f"{scenario.name}-flat")


def _contention_gpu_s(res: SimResult) -> float:
    """GPU-seconds of compute the jobs did not get for running slower than alone: over its run a job
    computes ``run_s / T`` iterations of ``gpus x compute_s`` GPU-seconds, ``T`` its mean iteration; alone
    it would have computed ``run_s / T_alone`` of them."""
    lost = 0.0
    for j in res.jobs:
        if (
            j.iterations <= 0
            or j.standalone_iteration_s <= 0
            or not j.run_s > 0
            or not j.mean_iteration_s > 0
        ):
            continue
        per_iteration = j.busy_gpu_s / j.iterations  # gpus x compute_s
        lost += j.run_s * per_iteration * (1.0 / j.standalone_iteration_s - 1.0 / j.mean_iteration_s)
    return lost


def _row(variant: str, policy: str, res: SimResult) -> LlmRow:
    slow = [j.slowdown for j in res.jobs if j.iterations > 0]
    fabric = tuple(
        (str(j.id), tuple(dict(j.fabric_bytes_per_iteration).get(k, float("nan")) for k in KINDS))
        for j in res.jobs
    )
    return LlmRow(
        variant=variant,
        policy=policy,
        gpu_utilization=res.gpu_utilization,
        contention_gpu_s=_contention_gpu_s(res),
        mean_slowdown=sum(slow) / len(slow) if slow else float("nan"),
        fabric_bytes=fabric,
    )


def grouped_vs_flat(scenario: Scenario, policies: Sequence[str]) -> LlmComparison:
    """Simulate ``scenario`` as written and flattened under every policy.

    Examples
    --------
    >>> from dataclasses import replace
    >>> from commsched.io.shipped import resolve_scenario
    >>> sc = replace(resolve_scenario("llm-h200"), horizon_s=5.0)
    >>> cmp = grouped_vs_flat(sc, ["crux-full"])
    >>> dict(cmp.row("grouped", "crux-full").fabric_bytes)["gpt13b"][0]  # TP stays inside the hosts
    0.0
    """
    from commsched.api.runner import simulate_scenario

    flat = flat_scenario(scenario)
    rows = []
    for policy in policies:
        rows.append(_row("grouped", policy, simulate_scenario(scenario, policy=policy)))
        rows.append(_row("flat", policy, simulate_scenario(flat, policy=policy)))
    return LlmComparison(scenario=scenario.name, rows=tuple(rows))


def write_llm_plots(cmp: LlmComparison, out_dir: Path) -> list[Path]:
    """``fabric_bytes.png`` (per job and group kind, grouped against flat, first policy) and
    ``utilization.png`` (GPU utilisation per policy, grouped against flat)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    policies = list(dict.fromkeys(r.policy for r in cmp.rows))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    grouped, flat = (
        dict(cmp.row("grouped", policies[0]).fabric_bytes),
        dict(cmp.row("flat", policies[0]).fabric_bytes),
    )
    jobs = list(grouped)
    for k, kind in enumerate(KINDS):
        bottom = [sum(grouped[j][:k]) / 1e9 for j in jobs]
        ax.bar(
            [i - 0.2 for i in range(len(jobs))],
            [grouped[j][k] / 1e9 for j in jobs],
            0.4,
            bottom=bottom,
            label=f"grouped {kind}",
        )
    ax.bar(
        [i + 0.2 for i in range(len(jobs))],
        [sum(flat[j]) / 1e9 for j in jobs],
        0.4,
        label="flattened (dp)",
        color="grey",
    )
    ax.set_xticks(range(len(jobs)), jobs)
    ax.set_ylabel("GB per iteration onto the fabric")
    ax.legend(fontsize=7)
    paths = [out_dir / "fabric_bytes.png"]
    fig.tight_layout()
    fig.savefig(paths[0], dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for off, variant in ((-0.2, "grouped"), (0.2, "flat")):
        ax.bar(
            [i + off for i in range(len(policies))],
            [cmp.row(variant, p).gpu_utilization for p in policies],
            0.4,
            label=variant,
        )
    ax.set_xticks(range(len(policies)), policies)
    ax.set_ylabel("GPU utilisation")
    ax.legend()
    paths.append(out_dir / "utilization.png")
    fig.tight_layout()
    fig.savefig(paths[1], dpi=120)
    plt.close(fig)
    return paths
