"""The simulated twin of a testbed run: the same jobs, links, bytes, paths and classes, in the simulator.

* Link capacities: every emulated link at ``capacity x rate_scale x GOODPUT`` — the TCP goodput of a
  link shaped to that wire rate (runtime-notes §12.1: 1448 payload bytes per 1514-byte frame at MTU
  1500 with timestamps). Links the testbed does not emulate (NVLink, PCIe) keep their capacity.
* Bytes: every job's bytes per iteration times ``rate_scale`` (compute is not scaled).
* Paths: each connection's route is the path the routers report for its real 5-tuple (under ECMP the
  kernel's hash; under a pinning policy the probed port's path), so the comparison tests the model,
  not the hash function.
* Classes: the ones the daemon's last decision gave (the steady state after the profiling window).
* Time dilation ``time_scale`` (the testbed's ``--time-scale``): compute and bytes are multiplied
  by it as on the testbed, and the results' times divided by it.
* Command jobs (an unmodified program, :mod:`.commands`): the profile measured from their traffic in
  the profiling window, on the GPUs of their ranks, and nothing scaled (their bytes and compute are
  the program's own); a job that ended by itself runs as many iterations as it did. The gaps
  between the synchronous steps of the job's collective, measured from its traffic per job
  (``pause_s`` per iteration, :func:`commsched.runtime.profiling.compute.compute_of`), are time its
  links carry none of its bytes: the twin runs them before the iteration's communication, as
  time the job holds no link (the simulator's own per-step latency holds the step's share of its
  links through the latency, so a lower class could not use them). The job's GPU busy time in
  the report stays its compute.
* Window: the simulated run lasts the profiling window plus the measuring window; averages are over
  the measuring window, as on the testbed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from commsched.catalog import placement_registry, policy_registry
from commsched.io.scenario import Scenario
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.state import ClusterState, ConnectionKey, Decisions
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.results.records import Mode, SimConfig, SimResult
from commsched.topology import LinkId, NodeId, Topology
from commsched.workload import JobId

__all__ = ["GOODPUT", "MeasuredJob", "TwinFacts", "simulate_twin", "twin_topology"]

#: TCP payload per wire byte of a full-size frame: 1448 / (1448 + 66 header bytes)
GOODPUT = 1448 / 1514


def twin_topology(
    topology: Topology, emulated: Mapping[LinkId, float], *, link_latency_s: float | None = None
) -> Topology:
    """``topology`` with every emulated link at its goodput (``emulated``: shaped rate, bit/s).

    ``link_latency_s`` (optional) replaces the latency of every emulated link (the twin's alpha).
    """
    links = [
        replace(
            lk,
            capacity_bps=float(emulated[lk.id]) * GOODPUT,
            latency_s=lk.latency_s if link_latency_s is None else link_latency_s,
        )
        if lk.id in emulated
        else lk
        for lk in topology.links
    ]  # bits/s throughout
    return Topology(
        name=topology.name, nodes=topology.nodes, links=links, hosts=topology.hosts, params=topology.params
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasuredJob:
    """A command job as the twin runs it: its measured profile on its ranks' GPUs, unscaled."""

    compute_s: float
    sync_bytes: float
    overlap: float
    gpus: tuple[NodeId, ...]
    iterations: int | None = None
    pause_s: float = 0.0  # per iteration: the gaps between the steps of its collective, links idle


def _route_index(topology: Topology, key: ConnectionKey, links: tuple[int, ...]) -> int | None:
    paths = topology.equal_cost_paths(topology.nic_of(key.src), topology.nic_of(key.dst))
    for i, p in enumerate(paths):
        if tuple(int(x) for x in p.links) == links:
            return i
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class TwinFacts:
    """What the testbed run measured that the twin replays.

    ``paths``: (job, src GPU, dst GPU) -> the links a connection took; ``classes``: job -> the class the
    daemon gave it; ``step_latency_s``: the measured latency of one ring step (testbed seconds);
    ``measured_jobs``: command jobs, by id, with their profile measured from their traffic.
    """

    paths: Mapping[tuple[str, str, str], tuple[int, ...]]
    classes: Mapping[str, int]
    step_latency_s: float | None = None
    measured_jobs: Mapping[str, MeasuredJob] | None = None


def simulate_twin(
    scenario: Scenario,
    *,
    policy: str,
    rate_scale: float,
    emulated: Mapping[LinkId, float],
    facts: TwinFacts,
    warmup_s: float,
    window_s: float,
    time_scale: float = 1.0,
) -> tuple[SimResult, int]:
    """Simulate the twin; returns the result and how many measured paths the model does not have.

    ``step_latency_s``: the measured latency of one ring step (testbed seconds); spread evenly over
    the links of the longest measured path, so that a step along it costs that much in the model.
    """
    paths, classes, step_latency_s, measured_jobs = (
        facts.paths, facts.classes, facts.step_latency_s, facts.measured_jobs
    )  # fmt: skip
    per_link = None
    if step_latency_s is not None and paths:
        per_link = step_latency_s / max(len(v) for v in paths.values())
    topo = twin_topology(scenario.topology, emulated, link_latency_s=per_link)
    routes: dict[ConnectionKey, int] = {}
    unknown = 0
    for (job, src, dst), links in paths.items():
        key = ConnectionKey(job=JobId(job), src=NodeId(src), dst=NodeId(dst))
        idx = _route_index(topo, key, links)
        if idx is None:
            unknown += 1
        else:
            routes[key] = idx
    inner = policy_registry().get(policy, where="--policies").communication
    fixed_classes = {JobId(j): int(c) for j, c in classes.items()}

    def measured(state: ClusterState, ctx: PolicyContext) -> Decisions:
        d = inner(state, ctx)
        return replace(
            d,
            routes=MappingProxyType({**d.routes, **routes}),
            classes=MappingProxyType({**d.classes, **fixed_classes}),
        )

    jobs = []
    for j in scenario.jobs:
        p = j.spec.profile
        m = (measured_jobs or {}).get(str(j.spec.id))
        if m is not None:  # the program's own bytes and compute: nothing scaled
            prof = replace(p, compute_s=m.compute_s + m.pause_s, sync_bytes=m.sync_bytes, overlap=m.overlap)
            spec = replace(
                j.spec,
                profile=prof,
                iterations=m.iterations,
                duration_s=None,
                gpus=len(m.gpus),
                gpu_ids=m.gpus,
                transport="persistent",  # an unmodified program's TCP connections keep their first routes
            )
            jobs.append(SimJob(spec=spec, gpus=m.gpus))
            continue
        scaled = replace(  # bytes scaled like the links; compute and bytes dilated alike
            p, compute_s=p.compute_s * time_scale, sync_bytes=p.sync_bytes * rate_scale * time_scale
        )
        jobs.append(SimJob(spec=replace(j.spec, profile=scaled, iterations=None), gpus=j.gpu_ids))
    sim = Simulation(
        topology=topo,
        jobs=jobs,
        policy=measured,
        placement=placement_registry().get(scenario.placement, where="placement"),
        config=SimConfig(
            horizon_s=warmup_s + window_s, mode=Mode.EXACT, seed=scenario.seed, warmup_s=warmup_s
        ),
        policy_name=policy,
        priority_levels=scenario.priority_levels,
    )
    return sim.run(), unknown
