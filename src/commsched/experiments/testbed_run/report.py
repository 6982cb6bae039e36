"""One policy's part of a testbed run's report: measured beside the simulated twin, paths, profiles.

Every time is on the cluster's scale (the testbed's are divided by the run's time dilation); a job's
``gap`` is ``measured / simulated - 1`` (the twin: :mod:`.twin`).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from commsched.experiments.testbed_run.command_report import command_inputs, command_rows
from commsched.experiments.testbed_run.twin import TwinFacts, simulate_twin
from commsched.io.scenario import Scenario
from commsched.runtime.launch.jobs import CommandJob, JobLayout
from commsched.runtime.launch.session import PolicyRun
from commsched.runtime.launch.settings import RunOptions
from commsched.topology import LinkId

__all__ = ["Twins", "library_rows", "measured_means", "policy_report"]


def measured_means(run: PolicyRun, warmup_s: float) -> dict[str, dict[str, float]]:
    """Per job: mean iteration time over iterations that start after ``warmup_s`` (mean over hosts)."""
    out: dict[str, dict[str, float]] = {}
    t0 = run.start + warmup_s
    for job, results in run.outputs.items():
        means, counts, medians = [], [], []
        for res in results:
            its = [(a, b) for a, b in res["iterations"] if a >= t0]
            if its:
                means.append(sum(b - a for a, b in its) / len(its))
                medians.append(statistics.median(b - a for a, b in its))
                counts.append(len(its))
        out[job] = {
            "mean": sum(means) / len(means) if means else math.nan,
            "median": sum(medians) / len(medians) if medians else math.nan,
            "iterations": float(min(counts)) if counts else 0.0,
        }
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Twins:
    """The simulated twins of one run: without and with the measured step latency, and the one used."""

    ideal: Any
    calibrated: Any
    used: Any
    unknown_paths: int
    #: the per-step latency the job processes timed (median), the calibrated twin's; ``None``: not timed
    alpha: float | None


def _twins(
    scenario: Scenario, tb: Any, run: PolicyRun, opts: RunOptions, *, cmd: Any, emulated: Any
) -> Twins:
    """The twin at the links' own latency and, when the job processes timed a step, at that latency."""
    classes = {j: int(v["class"]) for j, v in run.decision.get("jobs", {}).items()}
    steps = [
        float(r["step_latency_s"])
        for results in run.outputs.values()
        for r in results
        if r.get("step_latency_s") is not None
    ]
    alpha = statistics.median(steps) if steps else None

    def twin(step_latency_s: float | None) -> tuple[Any, int]:
        return simulate_twin(
            scenario,
            policy=run.policy,
            rate_scale=opts.rate_scale,
            emulated=emulated,
            facts=TwinFacts(
                paths={**run.paths, **cmd.paths},
                classes=classes,
                step_latency_s=step_latency_s,
                measured_jobs=cmd.measured,
            ),
            warmup_s=opts.profiling_window_s,
            window_s=opts.window_s,
            time_scale=opts.time_scale,
        )

    ideal, unknown = twin(None)
    calibrated = twin(alpha)[0] if alpha is not None else None  # reported either way
    used = calibrated if (opts.calibrate and calibrated is not None) else ideal
    return Twins(ideal=ideal, calibrated=calibrated, used=used, unknown_paths=unknown, alpha=alpha)


def policy_report(
    scenario: Scenario,
    tb: Any,
    run: PolicyRun,
    *,
    jobs: list[JobLayout],
    opts: RunOptions,
    commands: list[CommandJob] | None = None,
    intra_links: dict[int, float] | None = None,
) -> dict[str, Any]:
    """One policy's part of the report (``intra_links``: intra-host links shaped on loopback, bit/s)."""
    commands = commands or []
    emulated = {**tb.scaled_capacity_bps(), **{LinkId(k): v for k, v in (intra_links or {}).items()}}
    cmd = command_inputs(tb, commands, run, profiling_s=opts.profiling_window_s, window_s=opts.window_s)
    twins = _twins(scenario, tb, run, opts, cmd=cmd, emulated=emulated)
    sim = twins.used
    out_jobs = library_rows(tb, jobs, run, opts=opts, twins=twins)
    simulated_cmd = {str(r.id): float(r.mean_iteration_s) for r in sim.jobs if str(r.id) in cmd.windows}
    out_jobs.update(command_rows(commands, cmd, run, simulated_cmd, run.work))
    planned = {
        (c["job"], c["src"], c["dst"]): tuple(int(x) for x in c["links"])
        for c in run.decision.get("connections", [])
    }
    taken = {**run.paths, **cmd.paths}
    return {
        "jobs": out_jobs,
        "allocated_gpu_utilization": _allocated(jobs, commands, out_jobs, sim),
        "paths": {
            "connections": len(taken),
            "on_decision_path": sum(1 for k, v in taken.items() if planned.get(k) == v),
            "not_in_model": twins.unknown_paths,
            **_command_paths(cmd),
        },
        # the bytes each link of the command jobs' paths sent in the measuring window (its counters)
        "link_bytes": {
            str(lk): run.link_bytes.get(lk, 0)
            for lk in sorted({int(x) for v in cmd.paths.values() for x in v})
            if lk in run.link_bytes
        },
        "decision_version": run.decision.get("version"),
        "profiles": {
            **{
                j: r.get("profile") for j, results in run.outputs.items() for r in results if r.get("profile")
            },
            **cmd.profiles,
        },
        "step_latency_s": twins.alpha,
        "twin_calibrated": bool(opts.calibrate and twins.calibrated is not None),
    }


def _command_paths(cmd: Any) -> dict[str, Any]:
    """The report's path counts of the command jobs' connections (both directions) and the unpinned."""
    return {
        "command_connections": sum(t["fabric_connections"] for t in cmd.traced.values()),
        "command_forward_on_decision_path": sum(t["on_decision_path"] for t in cmd.traced.values()),
        "command_reverse_on_decision_path": sum(t["reverse_on_decision_path"] for t in cmd.traced.values()),
        "unpinned": [{"job": j, **u} for j, t in cmd.traced.items() for u in t["unpinned"]],
    }


def library_rows(
    tb: Any, jobs: list[JobLayout], run: PolicyRun, *, opts: RunOptions, twins: Twins
) -> dict[str, dict[str, Any]]:
    """The report rows of the library jobs (every time on the cluster's time scale)."""
    ideal, calibrated, sim = twins.ideal, twins.calibrated, twins.used
    d = opts.time_scale
    measured = {
        k: {**v, "mean": v["mean"] / d, "median": v["median"] / d}
        for k, v in measured_means(run, opts.profiling_window_s).items()
    }
    simulated = {str(r.id): float(r.mean_iteration_s) / d for r in sim.jobs}
    simulated_ideal = {str(r.id): float(r.mean_iteration_s) / d for r in ideal.jobs}
    simulated_calibrated = (
        {} if calibrated is None else {str(r.id): float(r.mean_iteration_s) / d for r in calibrated.jobs}
    )
    dscps: dict[str, set[int]] = defaultdict(set)
    for job, results in run.outputs.items():
        for res in results:
            dscps[job].update(int(c["dscp"]) for c in res["connections"])
    out = {}
    for j in jobs:
        m, s = measured[j.id]["mean"], simulated[j.id]
        out[j.id] = {
            "measured_iteration_s": m,
            "simulated_iteration_s": s,
            "gap": m / s - 1 if s > 0 else math.nan,
            "simulated_ideal_iteration_s": simulated_ideal[j.id],
            "simulated_calibrated_iteration_s": simulated_calibrated.get(j.id),
            "measured_median_iteration_s": measured[j.id]["median"],
            "iterations_measured": measured[j.id]["iterations"],
            "cpu_s": sum(float(r.get("cpu_s", 0.0)) for r in run.outputs.get(j.id, [])),
            "class": run.decision.get("jobs", {}).get(j.id, {}).get("class"),
            "dscp": run.decision.get("jobs", {}).get(j.id, {}).get("dscp"),
            "dscp_on_sockets": sorted(dscps[j.id]),
            "compute_s": j.compute_s,
            "scaled_bytes": tb.scale_bytes(j.sync_bytes),
        }
    return out


def _allocated(
    jobs: list[JobLayout], commands: list[CommandJob], rows: dict[str, dict[str, Any]], sim: Any
) -> dict[str, float]:
    """Allocated-GPU utilisation measured and simulated (compute over iteration, per GPU)."""
    gpus = {j.id: len(j.gpus) for j in jobs} | {c.id: len(c.gpus) for c in commands}
    compute = {j.id: j.compute_s for j in jobs} | {
        c.id: float(rows[c.id]["compute_s"] or 0.0) for c in commands if c.id in rows
    }

    def util(key: str) -> float:
        busy = sum(
            gpus[k] * compute[k] / rows[k][key]
            for k in gpus
            if k in rows and (rows[k][key] or 0) > 0 and math.isfinite(rows[k][key])
        )
        return busy / sum(gpus.values()) if gpus else math.nan

    return {
        "measured": util("measured_iteration_s"),
        "simulated": util("simulated_iteration_s"),
        "simulated_window": float(sim.allocated_gpu_utilization),
    }
