"""Committing and releasing placements on a :class:`FabricState`, and the shape rule of virtual Clos."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from commsched.errors import InputError
from commsched.scheduling.vclos.fabric import (
    Fabric,
    FabricState,
    GpuAddr,
    JobRequest,
    Placement,
    SourceRouting,
    gpu_index,
)


def _set(
    owner: tuple[str | None, ...], idx: Iterable[int], value: str | None, what: str
) -> tuple[str | None, ...]:
    out = list(owner)
    for i in idx:
        if value is not None and out[i] is not None:
            raise InputError(f"{what} {i} is already held by job {out[i]!r}", where="commit")
        out[i] = value
    return tuple(out)


def commit(state: FabricState, placement: Placement) -> FabricState:
    """The state with ``placement``'s GPUs, leaf up ports and spine ports marked as its job's.

    Raises
    ------
    InputError
        When the job is already placed or a resource is already held (a bug in the caller).
    """
    f, job = state.fabric, placement.job_id
    if job in state.placements:
        raise InputError(f"job {job!r} is already placed", where="commit")
    gpus = _set(state.gpu_owner, (gpu_index(f, g) for g in placement.gpus), job, "GPU")
    cables = _set(
        state.cable_owner, (c.leaf * f.up_ports + c.port for c in placement.cables), job, "leaf port"
    )
    spine = _set(
        state.spine_port_owner,
        (c.spine * f.spine_ports + c.spine_port for c in placement.cables),
        job,
        "spine port",
    )
    return FabricState(
        fabric=f,
        gpu_owner=gpus,
        cable_owner=cables,
        spine_port_owner=spine,
        placements={**state.placements, job: placement},
    )


def release(state: FabricState, job_id: str) -> FabricState:
    """The state after job ``job_id`` leaves: its GPUs and reserved links are idle again.

    Examples
    --------
    >>> from commsched.scheduling.vclos.fabric import Fabric, empty_state
    >>> from commsched.scheduling.vclos.placement import allocate_vclos
    >>> s0 = empty_state(Fabric(leaves=2, spines=2, servers_per_leaf=1, gpus_per_server=2))
    >>> s1, _ = allocate_vclos(s0, JobRequest(job_id="a", gpus=2))
    >>> release(s1, "a") == s0
    True

    Raises
    ------
    InputError
        When the job is not placed.
    """
    if job_id not in state.placements:
        raise InputError(
            f"job {job_id!r} is not placed",
            where="release",
            expected="one of " + ", ".join(sorted(state.placements)),
        )
    p = state.placements[job_id]
    f = state.fabric
    gpus = _set(state.gpu_owner, (gpu_index(f, g) for g in p.gpus), None, "GPU")
    cables = _set(state.cable_owner, (c.leaf * f.up_ports + c.port for c in p.cables), None, "leaf port")
    spine = _set(state.spine_port_owner, (c.spine * f.spine_ports + c.spine_port for c in p.cables), None, "")
    rest = {k: v for k, v in state.placements.items() if k != job_id}
    return FabricState(fabric=f, gpu_owner=gpus, cable_owner=cables, spine_port_owner=spine, placements=rest)


def servers_needed(fabric: Fabric, gpus: int) -> int:
    """Whole servers a job of ``gpus`` GPUs needs under the locality constraint (ceil(N/T))."""
    return -(-gpus // fabric.gpus_per_server)


def clos_shapes(fabric: Fabric, gpus: int, *, max_vleaves_per_leaf: int = 1) -> tuple[tuple[int, int], ...]:
    """Candidate virtual Clos shapes ``(l, s)`` for a job, in the order the scheduler tries them.

    A virtual leaf holds ``s`` GPUs on ``s / T`` whole idle servers (locality, eq. 5) and has one
    link to each of ``s`` virtual spines, so ``s`` must be a multiple of T, at most the leaf's up
    ports, and ``l >= 2`` (one leaf is stage 1). The job's size is rounded up: first to whole
    servers, then, when that server count ``Q`` has no factorisation ``Q = l * (s / T)`` that fits
    the fabric, to the next count that has one. This is the paper's note on N (§6.1: "N^new, the
    smallest composite number greater than N"), stated over servers. Shapes of the smallest
    feasible size are returned with power-of-two ``s`` first ("the number of ports in each virtual
    leaf is as large as possible to a power of 2", A.2; halving-doubling is contention-free only
    then), each group by ``l`` ascending (Algorithm 3 starts from the smallest ``l``).

    Examples
    --------
    >>> f = Fabric(leaves=4, spines=4, servers_per_leaf=2, gpus_per_server=2)
    >>> clos_shapes(f, 6)
    ((3, 2),)
    >>> clos_shapes(f, 8)
    ((2, 4), (4, 2))

    References
    ----------
    vClos §6.1 (locality, note on N), Appendix A.2 (Algorithm 3, eqs. 3 and 5).
    """
    t = fabric.gpus_per_server
    max_q = min(fabric.servers_per_leaf, fabric.up_ports // t)
    max_l = fabric.leaves * max_vleaves_per_leaf
    for total in range(servers_needed(fabric, gpus), fabric.n_servers + 1):
        found = tuple(
            (nl, (total // nl) * t)
            for nl in range(2, min(max_l, total) + 1)
            if total % nl == 0 and total // nl <= max_q
        )
        if found:
            return tuple(sorted(found, key=lambda sh: (sh[1] & (sh[1] - 1) != 0, sh[0])))
    return ()


def ordered_ports(fabric: Fabric, servers: Sequence[int]) -> list[int]:
    """Down ports of ``servers`` (server indices within a leaf), server by server."""
    t = fabric.gpus_per_server
    return [srv * t + g for srv in servers for g in range(t)]


def empty_routing() -> SourceRouting:
    """Routing entries of a job that needs none (one server, or one leaf)."""
    return SourceRouting(uplink={}, plane={})


def check_request(state: FabricState, job: JobRequest) -> None:
    """Reject a job that is already placed or larger than the fabric."""
    if job.job_id in state.placements:
        raise InputError(f"job {job.job_id!r} is already placed", where="allocate")
    if job.gpus > state.fabric.n_gpus:
        raise InputError(
            f"job {job.job_id!r} asks for {job.gpus} GPUs",
            where="JobRequest.gpus",
            expected=f"at most the fabric's {state.fabric.n_gpus}",
        )


def leaf_gpus(fabric: Fabric, leaf: int, servers: Sequence[int]) -> list[GpuAddr]:
    """GPUs of some servers of one leaf, in port order."""
    return [GpuAddr(leaf=leaf, port=p) for p in ordered_ports(fabric, servers)]
