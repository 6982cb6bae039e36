"""Real jobs on the emulated testbed beside the simulator's prediction (``commsched testbed run``).

For a scenario with explicit placements, :func:`run_scenario` builds its topology as a testbed, probes
a source port per path for every connection the jobs open (per destination port), and runs each
policy in turn through the launcher (:mod:`commsched.runtime.launch`): daemon, one agent per host,
one job process per (job, host), for a profiling window plus a measuring window. Each policy's measured
mean iteration times are reported beside the simulated twin's (:mod:`.twin`), with the allocated-GPU
utilisation of both.

This is an edge module: it imports the simulator and the runtime / testbed side by side.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from commsched.experiments.testbed_run.commands import command_jobs
from commsched.experiments.testbed_run.layout import job_layouts
from commsched.experiments.testbed_run.placing import (
    placed_scenario,
    policy_placement,
    static_circuits,
)
from commsched.experiments.testbed_run.report import measured_means, policy_report
from commsched.io.scenario import Scenario
from commsched.runtime.launch.fabric import launched, probe_table, set_circuits, shape_intra_host, tune
from commsched.runtime.launch.session import run_policy
from commsched.runtime.launch.settings import RunOptions, RunSettings

__all__ = ["RunOptions", "measured_means", "run_scenario"]


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
        "policies": {},
    }
    try:
        with launched(scenario.topology, opts, seed=seed) as built:
            report.update(tune(built, opts))
            settings = RunSettings(
                options=opts, priority_levels=scenario.priority_levels, seed=seed, topology=topology_spec
            )
            ctx = _Context(
                scenario=scenario, topology_spec=topology_spec, settings=settings, opts=opts, work=work
            )
            tb = built
            for policy in opts.policies:
                tb = _run_one(ctx, tb, policy, report)
    finally:
        if opts.keep_dir is not None:
            shutil.copytree(work, opts.keep_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.sock"))
        shutil.rmtree(work, ignore_errors=True)
    return report


@dataclass(frozen=True, slots=True, kw_only=True)
class _Context:
    """What every policy of one run shares (``tables``: probe tables per placement and circuits)."""

    scenario: Scenario
    topology_spec: dict[str, Any]
    settings: RunSettings
    opts: RunOptions
    work: Path
    tables: dict[tuple[Any, ...], tuple[Path, dict[str, Any]]] = field(default_factory=dict)


def _run_one(ctx: _Context, tb: Any, policy: str, report: dict[str, Any]) -> Any:
    """Place, lay out, probe and run the jobs under ``policy``; its report goes in ``report``.

    Returns the testbed (rebuilt when the policy's circuits changed it).
    """
    opts = ctx.opts
    placing = policy_placement(ctx.scenario, policy)
    placed = placed_scenario(ctx.scenario, placing)
    circuits = placing.circuits if placing.circuits_changed else None
    static = static_circuits(tb.topology) if tb.topology.params.get("ocs") else None
    tb = set_circuits(tb, circuits, static=static)
    nic_ip = {str(n): ip for h in tb.topology.hosts for n, ip in tb.host_addresses(h.id).items()}
    library = replace(placed, jobs=tuple(j for j in placed.jobs if not j.command))
    jobs = job_layouts(library, tb.topology, nic_ip)
    commands = command_jobs(placed, tb)
    intra = shape_intra_host(tb, jobs)
    key = (tuple(sorted((k, tuple(v)) for k, v in placing.gpus.items())), circuits)
    if key not in ctx.tables:
        table = ctx.work / f"ports-{len(ctx.tables)}.json"
        opts.say(f"probing the paths of {len(jobs)} library jobs' connections")
        ctx.tables[key] = (table, probe_table(tb, jobs, table))
    table, probed = ctx.tables[key]
    report.setdefault("probe", probed)
    spec = ctx.topology_spec
    if circuits is not None:
        spec = {**spec, "circuits": [list(r) for r in circuits]}
    settings = replace(ctx.settings, topology=spec)
    run = run_policy(tb, jobs, policy, settings, work=ctx.work / policy, table=table, commands=commands)
    twin_scenario = placed if circuits is None else replace(placed, topology=tb.topology)
    out = policy_report(
        twin_scenario, tb, run, jobs=jobs, opts=opts, commands=commands, intra_links=intra["links"]
    )
    out["intra_host"] = {"shaped": len(intra["shaped"]), "unshaped": intra["unshaped"]}
    out["placement"] = {
        "placed_by": placing.placed_by,
        "hosts": {**{j.id: list(j.hosts) for j in jobs}, **{c.id: list(c.hosts) for c in commands}},
        "circuits_changed": placing.circuits_changed if placing.circuits is not None else None,
    }
    out["probe"] = probed
    report["policies"][policy] = out
    return tb
