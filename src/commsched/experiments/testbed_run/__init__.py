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

import math
import shutil
import statistics
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from commsched.experiments.testbed_run.command_report import command_inputs, command_rows
from commsched.experiments.testbed_run.commands import command_jobs
from commsched.experiments.testbed_run.layout import job_layouts
from commsched.experiments.testbed_run.placing import (
    PolicyPlacement,
    placed_scenario,
    policy_placement,
    static_circuits,
)
from commsched.experiments.testbed_run.queues import deepen_queues, mtu_packets, shape_loopback, steady_tcp
from commsched.experiments.testbed_run.twin import simulate_twin
from commsched.io.scenario import Scenario
from commsched.runtime.launch.jobs import CommandJob, JobLayout
from commsched.runtime.launch.session import PolicyRun, run_policy
from commsched.runtime.launch.settings import RunSettings
from commsched.topology import LinkId

__all__ = ["RunOptions", "measured_means", "run_scenario"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """How to run: policies in order, testbed name, rate scale, windows (s)."""

    policies: tuple[str, ...]
    name: str
    rate_scale: float
    profiling_window_s: float = 10.0
    window_s: float = 30.0
    time_scale: float = 1.0
    #: class queue size set on every emulated egress (0: keep the testbed's); see :mod:`.queues`
    queue_bytes: int = 8 << 20
    #: send MTU-sized packets from the hosts (no GSO), see :func:`.queues.mtu_packets`; off by
    #: default: on a shared 2-core machine the extra packets cost more CPU than they save latency
    mtu_packets: bool = False
    #: give the twin the per-step latency the job processes measured (else: links' own latency);
    #: off by default: that latency, timed with tiny all-reduces, overlaps with the transfers of a
    #: real step, and the calibrated twin came out 9-12 % slower than measured (docs/testbed-run.md)
    calibrate: bool = False
    #: job processes post their measured profile to the daemon after this share of the profiling
    #: window (0: the daemon decides with the declared profiles)
    profile_share: float = 0.6
    seed: int | None = None
    keep_dir: Path | None = None
    #: where progress lines go (the command line: stderr, unless --quiet)
    progress: Callable[[str], None] | None = None

    def say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)


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


def _probe_table(tb: Any, jobs: list[JobLayout], path: Path) -> dict[str, Any]:
    """Probe every connection's NIC pair for its destination port; write the agents' table."""
    from commsched.testbed.probe import probe

    pairs: dict[int, dict[tuple[str, str], None]] = defaultdict(dict)
    for job in jobs:
        for src, dst in job.ring():
            if src.nic != dst.nic and tb.topology.host_of(src.gpu).id != tb.topology.host_of(dst.gpu).id:
                pairs[dst.port][(str(src.nic), str(dst.nic))] = None
    entries: list[dict[str, Any]] = []
    found = total = 0
    for dport, chosen in sorted(pairs.items()):
        res = probe(tb.topology, tb.layout, list(chosen), dport=dport)  # type: ignore[arg-type]
        for pp in res.pairs:
            total += len(pp.ports) + len(pp.missing)
            found += len(pp.ports)
            for links, sport in pp.ports.items():
                entries.append(
                    {
                        "src_ip": tb.nic_address(pp.src),
                        "dst_ip": tb.nic_address(pp.dst),
                        "path": [int(x) for x in links],
                        "sport": int(sport),
                        "dport": dport,
                    }
                )
    import json

    path.write_text(json.dumps({"entries": entries}))
    return {"ports": len(pairs), "paths_found": found, "paths": total}


def run_scenario(scenario: Scenario, topology_spec: dict[str, Any], opts: RunOptions) -> dict[str, Any]:
    """Build the testbed, run every policy, tear down; the report (see ``docs/testbed-run.md``)."""
    from commsched.testbed import Testbed, build

    seed = scenario.seed if opts.seed is None else opts.seed
    work = Path(tempfile.mkdtemp(prefix=f"{opts.name}-"))
    work.chmod(0o755)  # command jobs may run as another user and read their files here
    opts.say(f"building testbed {opts.name} ({scenario.topology.name}, rate scale {opts.rate_scale:g})")
    state = build.up(scenario.topology, name=opts.name, rate_scale=opts.rate_scale, routing="ecmp", seed=seed)
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
        tb = Testbed(state)
        if opts.queue_bytes:
            report["queues_changed"] = deepen_queues(tb, opts.queue_bytes)
        steady_tcp(tb)
        if opts.mtu_packets:
            report["gso_off_nics"] = mtu_packets(tb)
        settings = RunSettings(
            profiling_window_s=opts.profiling_window_s,
            window_s=opts.window_s,
            priority_levels=scenario.priority_levels,
            seed=seed,
            topology=topology_spec,
            time_scale=opts.time_scale,
            profile_share=opts.profile_share,
            rate_scale=opts.rate_scale,
            progress=opts.progress,
        )
        ctx = _Context(
            scenario=scenario, topology_spec=topology_spec, settings=settings, opts=opts, work=work
        )
        for policy in opts.policies:
            tb = _run_one(ctx, tb, policy, report)
    finally:
        opts.say(f"tearing down testbed {opts.name}")
        _down(opts.name)
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
    tb, circuits = _set_circuits(tb, opts.name, placing)
    nic_ip = {str(n): ip for h in tb.topology.hosts for n, ip in tb.host_addresses(h.id).items()}
    library = replace(placed, jobs=tuple(j for j in placed.jobs if not j.command))
    jobs = job_layouts(library, tb.topology, nic_ip)
    commands = command_jobs(placed, tb)
    intra = shape_loopback(tb, jobs)
    key = (tuple(sorted((k, tuple(v)) for k, v in placing.gpus.items())), circuits)
    if key not in ctx.tables:
        table = ctx.work / f"ports-{len(ctx.tables)}.json"
        opts.say(f"probing the paths of {len(jobs)} library jobs' connections")
        ctx.tables[key] = (table, _probe_table(tb, jobs, table))
    table, probed = ctx.tables[key]
    report.setdefault("probe", probed)
    spec = ctx.topology_spec
    if circuits is not None:
        spec = {**spec, "circuits": [list(r) for r in circuits]}
    settings = replace(ctx.settings, topology=spec)
    run = run_policy(tb, jobs, policy, settings, work=ctx.work / policy, table=table, commands=commands)
    twin_scenario = placed if circuits is None else replace(placed, topology=tb.topology)
    out = _policy_report(twin_scenario, tb, jobs, run, opts, commands, intra["links"])
    out["intra_host"] = {"shaped": len(intra["shaped"]), "unshaped": intra["unshaped"]}
    out["placement"] = {
        "placed_by": placing.placed_by,
        "hosts": {**{j.id: list(j.hosts) for j in jobs}, **{c.id: list(c.hosts) for c in commands}},
        "circuits_changed": placing.circuits_changed if placing.circuits is not None else None,
    }
    out["probe"] = probed
    report["policies"][policy] = out
    return tb


def _down(name: str) -> None:
    """Remove the testbed and whatever its agents left (cgroups, nftables tables)."""
    from commsched.runtime.enforce.ledger import clean_dir
    from commsched.testbed import build
    from commsched.testbed.state import agents_dir

    clean_dir(agents_dir(name), kill=True)
    build.down(name)


def _set_circuits(
    tb: Any, name: str, placing: PolicyPlacement
) -> tuple[Any, tuple[tuple[int, ...], ...] | None]:
    """Set the OCS circuits ``placing`` asks for (``testbed rewire``), or the static ones back.

    Returns the testbed (rebuilt from its new state when circuits changed) and the circuit table
    the run uses (``None``: the static circuits).
    """
    from commsched.testbed import Testbed, build
    from commsched.testbed.state import read_state

    static = static_circuits(tb.topology) if tb.topology.params.get("ocs") else None
    raw = read_state(name).topology.get("circuits")
    current = None if raw is None else tuple(tuple(int(x) for x in r) for r in raw)
    if current == static:
        current = None
    wanted = placing.circuits if placing.circuits_changed else None
    if wanted == current:
        return tb, wanted
    return Testbed(build.rewire(name, wanted if wanted is not None else static or ())), wanted


def _policy_report(
    scenario: Scenario,
    tb: Any,
    jobs: list[JobLayout],
    run: PolicyRun,
    opts: RunOptions,
    commands: list[CommandJob] | None = None,
    intra_links: dict[int, float] | None = None,
) -> dict[str, Any]:
    """One policy's part of the report (``intra_links``: intra-host links shaped on loopback, bit/s)."""
    commands = commands or []
    emulated = {**tb.scaled_capacity_bps(), **{LinkId(k): v for k, v in (intra_links or {}).items()}}
    classes = {j: int(v["class"]) for j, v in run.decision.get("jobs", {}).items()}
    steps = [
        float(r["step_latency_s"])
        for results in run.outputs.values()
        for r in results
        if r.get("step_latency_s") is not None
    ]
    alpha = statistics.median(steps) if steps else None
    cmd = command_inputs(tb, commands, run, profiling_s=opts.profiling_window_s, window_s=opts.window_s)

    def twin(step_latency_s: float | None) -> tuple[Any, int]:
        return simulate_twin(
            scenario,
            policy=run.policy,
            rate_scale=opts.rate_scale,
            emulated=emulated,
            paths={**run.paths, **cmd.paths},
            classes=classes,
            warmup_s=opts.profiling_window_s,
            window_s=opts.window_s,
            time_scale=opts.time_scale,
            step_latency_s=step_latency_s,
            measured_jobs=cmd.measured,
        )

    ideal, unknown = twin(None)
    calibrated = twin(alpha)[0] if alpha is not None else None  # reported either way
    sim = calibrated if (opts.calibrate and calibrated is not None) else ideal
    out_jobs = _library_rows(tb, jobs, run, opts, ideal, calibrated, sim)
    simulated_cmd = {str(r.id): float(r.mean_iteration_s) for r in sim.jobs if str(r.id) in cmd.windows}
    work = run.work
    out_jobs.update(command_rows(commands, cmd, run, simulated_cmd, work))
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
            "not_in_model": unknown,
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
        "step_latency_s": alpha,
        "twin_calibrated": bool(opts.calibrate and alpha is not None),
    }


def _command_paths(cmd: Any) -> dict[str, Any]:
    """The report's path counts of the command jobs' connections (both directions) and the unpinned."""
    return {
        "command_connections": sum(t["fabric_connections"] for t in cmd.traced.values()),
        "command_forward_on_decision_path": sum(t["on_decision_path"] for t in cmd.traced.values()),
        "command_reverse_on_decision_path": sum(t["reverse_on_decision_path"] for t in cmd.traced.values()),
        "unpinned": [{"job": j, **u} for j, t in cmd.traced.items() for u in t["unpinned"]],
    }


def _library_rows(
    tb: Any, jobs: list[JobLayout], run: PolicyRun, opts: RunOptions, ideal: Any, calibrated: Any, sim: Any
) -> dict[str, dict[str, Any]]:
    """The report rows of the library jobs (every time on the cluster's time scale)."""
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
