"""Real jobs on the emulated testbed beside the simulator's prediction (``commsched testbed run``).

For a scenario with explicit placements, :func:`run_scenario` turns each policy into a launch plan
(:func:`launch_plan`: where its jobs run, which OCS circuits its placement asks for), has the launcher
(:mod:`commsched.runtime.launch`) build the testbed, run the plan (daemon, one agent per host, one job
process per (job, host), for a profiling window plus a measuring window) and tear the testbed down, and
reports each policy's measured mean iteration times beside the simulated twin's (:mod:`.twin`), with
the allocated-GPU utilisation of both.

This is an edge module: it imports the simulator and the runtime side by side."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from commsched.experiments.testbed_run.commands import command_jobs
from commsched.experiments.testbed_run.layout import job_layouts
from commsched.experiments.testbed_run.placing import (
    PolicyPlacement,
    placed_scenario,
    policy_placement,
    static_circuits,
)
from commsched.experiments.testbed_run.report import measured_means, policy_report
from commsched.io.scenario import Scenario
from commsched.runtime.launch.launcher import Launched, LaunchPlan, launched
from commsched.runtime.launch.settings import RunOptions, RunSettings
from commsched.testbed.cpu import CpuSample, CpuSampler, cpu_report
from commsched.testbed.handle import Testbed

__all__ = ["RunOptions", "launch_plan", "measured_means", "run_scenario"]


def run_scenario(scenario: Scenario, topology_spec: dict[str, Any], opts: RunOptions) -> dict[str, Any]:
    """Build the testbed, run every policy, tear down; the report (see ``docs/testbed-run.md``)."""
    seed = scenario.seed if opts.seed is None else opts.seed
    work = Path(tempfile.mkdtemp(prefix=f"{opts.name}-"))
    work.chmod(0o755)  # command jobs may run as another user and read their files here
    report: dict[str, Any] = {
        "scenario": scenario.name,
        "testbed": opts.name,
        "rate_scale": opts.rate_scale,
        "profiling_window_s": opts.profiling_window_s,
        "window_s": opts.window_s,
        "time_scale": opts.time_scale,
        "queue_bytes": opts.queue_bytes,
        "segment_bytes": opts.segment_bytes,
        "policies": {},
    }
    settings = RunSettings(
        options=opts, priority_levels=scenario.priority_levels, seed=seed, topology=topology_spec
    )
    try:
        with launched(scenario.topology, settings, work=work) as launcher:
            report.update(launcher.tuned)
            for policy in opts.policies:
                placing = policy_placement(scenario, policy)
                placed = placed_scenario(scenario, placing)
                plan = launch_plan(placed, placing, launcher.testbed)
                with CpuSampler(opts.name) as cpu:  # was the emulation short of CPU (docs/testbed-run.md)
                    done = launcher.launch(plan)
                report.setdefault("probe", done.probe)
                body = _policy_report(placed, placing, plan, done, opts, cpu=cpu.samples)
                report["policies"][policy] = body
                if body["cpu"]["short"]:
                    report.setdefault("cpu_short", []).append(policy)
    finally:
        if opts.keep_dir is not None:
            shutil.copytree(work, opts.keep_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.sock"))
        shutil.rmtree(work, ignore_errors=True)
    return report


def launch_plan(placed: Scenario, placing: PolicyPlacement, tb: Testbed) -> LaunchPlan:
    """Where the jobs of ``placed`` (a policy's placement of the scenario) run on ``tb``."""
    nic_ip = {str(n): ip for h in tb.topology.hosts for n, ip in tb.host_addresses(h.id).items()}
    library = replace(placed, jobs=tuple(j for j in placed.jobs if not j.command))
    return LaunchPlan(
        policy=placing.policy,
        jobs=tuple(job_layouts(library, tb.topology, nic_ip)),
        commands=tuple(command_jobs(placed, tb)),
        circuits=placing.circuits if placing.circuits_changed else None,
        static_circuits=static_circuits(tb.topology) if tb.topology.params.get("ocs") else None,
        placement=tuple(sorted((k, tuple(str(g) for g in v)) for k, v in placing.gpus.items())),
    )


def _policy_report(
    placed: Scenario,
    placing: PolicyPlacement,
    plan: LaunchPlan,
    done: Launched,
    opts: RunOptions,
    *,
    cpu: list[CpuSample],
) -> dict[str, Any]:
    """One policy's part of the report: measured beside the simulated twin, placement, probe."""
    tb, jobs, commands = done.testbed, list(plan.jobs), list(plan.commands)
    twin_scenario = placed if plan.circuits is None else replace(placed, topology=tb.topology)
    out = policy_report(
        twin_scenario, tb, done.run, jobs=jobs, opts=opts, commands=commands, intra_links=done.intra["links"]
    )
    out["intra_host"] = {"shaped": len(done.intra["shaped"]), "unshaped": done.intra["unshaped"]}
    out["placement"] = {
        "placed_by": placing.placed_by,
        "hosts": {**{j.id: list(j.hosts) for j in jobs}, **{c.id: list(c.hosts) for c in commands}},
        "circuits_changed": placing.circuits_changed if placing.circuits is not None else None,
    }
    out["probe"] = done.probe
    begin = done.run.start + opts.profiling_window_s
    out["cpu"] = cpu_report(cpu, start=begin, end=begin + opts.window_s)  # the measuring window's
    return out
