"""How a job synchronises: all-reduce among its GPUs, a parameter server, or BytePS.

* ``allreduce``: the job's collective (ring by default) over its GPUs, rank ``i`` on ``gpus[i]``.
* ``ps``: machine-level parameter server with ``k`` CPU machines: each GPU machine (its first GPU
  stands for the machine) pushes ``M/k`` to every server and pulls it back.
* ``byteps``: BytePS's optimal split (Jiang et al., OSDI'20, §4.1): every GPU machine pushes
  ``M_SSCPU`` to each CPU machine's summation service and ``M_SSGPU`` to every other GPU machine's,
  then pulls the aggregated parts back; per-machine traffic is ``2n(n-1)M / (n^2 + kn - 2k)``.

Intra-machine aggregation (GPUs to the machine's leader) runs over NVLink/PCIe in the real systems and
is not modelled for ``ps`` and ``byteps``. CPU machines are the first ``k`` hosts after the job's last
host (in host order, wrapping around) that hold none of its GPUs; the server runs behind the host's
first NIC.
"""

from __future__ import annotations

from dataclasses import dataclass

from commsched.errors import InputError
from commsched.intrajob.byteps import byteps_assignment
from commsched.scheduling.state import PlacedJob
from commsched.topology import NodeId, Path, Topology
from commsched.workload import CollectiveSchedule, Step, SyncKind, Transfer
from commsched.workload.collectives import build_collective, ps_push_pull


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class SyncPlan:
    """A job's per-iteration synchronisation: the schedule and the node of each of its endpoints."""

    schedule: CollectiveSchedule
    endpoints: tuple[NodeId, ...]


def machine_leaders(topology: Topology, job: PlacedJob) -> tuple[NodeId, ...]:
    """The first GPU of each host of the job, in the order the hosts first appear."""
    seen: dict[str, NodeId] = {}
    for g in job.gpus:
        seen.setdefault(str(topology.host_of(g).id), g)
    return tuple(seen.values())


def cpu_machines(topology: Topology, job: PlacedJob, k: int) -> tuple[NodeId, ...]:
    """The NICs of the ``k`` CPU machines serving a PS / BytePS job (module docstring)."""
    hosts = topology.hosts
    mine = {topology.host_of(g).id for g in job.gpus}
    last = max((i for i, h in enumerate(hosts) if h.id in mine), default=-1)
    out: list[NodeId] = []
    for step in range(1, len(hosts) + 1):
        h = hosts[(last + step) % len(hosts)]
        if h.id not in mine and h.nics:
            out.append(h.nics[0])
        if len(out) == k:
            return tuple(out)
    raise InputError(
        f"job {job.id!r} asks for {k} CPU machines but only {len(out)} hosts hold none of its GPUs",
        where=f"jobs.{job.id}.cpu_machines",
        expected=f"at most {len(out)}",
    )


def byteps_schedule(n: int, k: int, size_bytes: float) -> CollectiveSchedule:
    """Push to every summation service, then pull back (machines ``0..n-1``, CPU machines after)."""
    a = byteps_assignment(gpu_machines=n, cpu_machines=k, model_bytes=size_bytes)
    used = a.cpu_machines_used
    push = [Transfer(src=i, dst=n + j, size_bytes=a.ss_cpu_bytes) for i in range(n) for j in range(used)]
    push += [Transfer(src=i, dst=o, size_bytes=a.ss_gpu_bytes) for i in range(n) for o in range(n) if o != i]
    push = [t for t in push if t.size_bytes > 0]
    pull = [Transfer(src=t.dst, dst=t.src, size_bytes=t.size_bytes) for t in push]
    steps = tuple(Step(transfers=tuple(s), label=lbl) for s, lbl in ((push, "push"), (pull, "pull")) if s)
    return CollectiveSchedule(algorithm="byteps", ranks=n, size_bytes=size_bytes, steps=steps, servers=used)


def sync_plan(
    topology: Topology, job: PlacedJob, *, all_reduce: CollectiveSchedule | None = None
) -> SyncPlan:
    """The schedule a placed job runs each iteration, with the node of every endpoint."""
    spec = job.spec
    if spec.sync is SyncKind.ALLREDUCE:
        sched = all_reduce or build_collective(
            spec.collective, ranks=len(job.gpus), size_bytes=spec.profile.sync_bytes
        )
        return SyncPlan(schedule=sched, endpoints=job.gpus)
    leaders = machine_leaders(topology, job)
    k = spec.ps_servers
    if spec.sync is SyncKind.PS:
        if k < 1:
            raise InputError(
                "a parameter-server job needs CPU machines",
                where=f"jobs.{job.id}.cpu_machines",
                expected="at least 1",
            )
        servers = cpu_machines(topology, job, k)
        return SyncPlan(
            schedule=ps_push_pull(ranks=len(leaders), size_bytes=spec.profile.sync_bytes, servers=k),
            endpoints=leaders + servers,
        )
    if len(leaders) < 2:
        sched = build_collective("ring", ranks=len(job.gpus), size_bytes=spec.profile.sync_bytes)
        return SyncPlan(schedule=sched, endpoints=job.gpus)  # one machine: BytePS is a local all-reduce
    servers = cpu_machines(topology, job, min(k, len(leaders))) if k > 0 else ()
    sched = byteps_schedule(len(leaders), len(servers), spec.profile.sync_bytes)
    return SyncPlan(schedule=sched, endpoints=leaders + servers)


def endpoint_route(topology: Topology, src: NodeId, dst: NodeId, choice: int) -> Path:
    """A route between two endpoints that are GPUs or NICs (PS servers behind a NIC)."""
    a_gpu = topology.node(src).kind.value == "gpu"
    b_gpu = topology.node(dst).kind.value == "gpu"
    if a_gpu and b_gpu:
        return topology.gpu_route(src, dst, choice)
    nic_a = topology.nic_of(src) if a_gpu else src
    nic_b = topology.nic_of(dst) if b_gpu else dst
    first = topology.intra_host_path(src, nic_a) if a_gpu else Path(nodes=(src,), links=())
    last = topology.intra_host_path(nic_b, dst) if b_gpu else Path(nodes=(dst,), links=())
    if nic_a == nic_b:
        mid = Path(nodes=(nic_a,), links=())
    else:
        paths = topology.equal_cost_paths(nic_a, nic_b)
        mid = paths[choice % len(paths)]
    return Path(
        nodes=first.nodes[:-1] + mid.nodes + last.nodes[1:], links=first.links + mid.links + last.links
    )
