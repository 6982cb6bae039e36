"""vClos placement (stages 0-2) and the placement side of the baselines (best, locality packing).

Every ``allocate_*`` function is pure: ``(state, job) -> (new_state, placement)``, or raises
:class:`~commsched.errors.InfeasibleError` when the job cannot be placed now (it waits).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from commsched.errors import InfeasibleError
from commsched.scheduling.vclos.fabric import (
    FabricState,
    GpuAddr,
    JobRequest,
    Placement,
    PlaneId,
    SourceRouting,
    Stage,
    fixed_cable,
    free_cables,
    free_spine_ports,
    idle_gpus,
    idle_gpus_per_server,
    idle_servers,
    idle_servers_per_leaf,
)
from commsched.scheduling.vclos.ilp import (
    ClosProblem,
    ClosSolution,
    brute_force_clos,
    solve_clos,
    solve_clos_ilp,
)
from commsched.scheduling.vclos.patterns import aligned_layout
from commsched.scheduling.vclos.state import (
    check_request,
    clos_shapes,
    commit,
    empty_routing,
    leaf_gpus,
    ordered_ports,
    servers_needed,
)

Allocator = Callable[[FabricState, JobRequest], tuple[FabricState, Placement]]


def place_in_server(state: FabricState, job: JobRequest) -> Placement | None:
    """Stage 0: the job (N <= T) on the feasible server with the fewest idle GPUs (best fit).

    Ties go to the lowest server; the lowest-numbered idle GPUs of the server are used.

    References
    ----------
    vClos §6.1 Stage 0; §7.1.
    """
    f = state.fabric
    free = idle_gpus_per_server(state).ravel()
    fits = np.flatnonzero(free >= job.gpus)
    if job.gpus > f.gpus_per_server or len(fits) == 0:
        return None
    best = int(fits[np.argmin(free[fits])])
    leaf, srv = divmod(best, f.servers_per_leaf)
    idle = np.flatnonzero(idle_gpus(state)[leaf, srv])[: job.gpus]
    gpus = tuple(GpuAddr(leaf=leaf, port=srv * f.gpus_per_server + int(g)) for g in idle)
    return Placement(
        job_id=job.job_id, requested_gpus=job.gpus, stage=Stage.SERVER, gpus=gpus, routing=empty_routing()
    )


def place_in_leaf(state: FabricState, job: JobRequest) -> Placement | None:
    """Stage 1: ceil(N/T) whole idle servers under the feasible leaf with the fewest idle servers.

    References
    ----------
    vClos §6.1 Stage 1, Algorithm 1 lines 1-11.
    """
    f = state.fabric
    q = servers_needed(f, job.gpus)
    r = idle_servers_per_leaf(state)
    fits = np.flatnonzero(r >= q)
    if len(fits) == 0:
        return None
    leaf = int(fits[np.argmin(r[fits])])
    servers = np.flatnonzero(idle_servers(state)[leaf])[:q].tolist()
    return Placement(
        job_id=job.job_id,
        requested_gpus=job.gpus,
        stage=Stage.LEAF,
        gpus=tuple(leaf_gpus(f, leaf, servers)),
        routing=empty_routing(),
    )


def clos_problem(state: FabricState, nl: int, s: int) -> ClosProblem:
    """The vClos-ILP inputs of the current state for shape ``(l, s)``."""
    f = state.fabric
    r = idle_servers_per_leaf(state)
    spine_free = free_spine_ports(state).sum(axis=1)
    return ClosProblem(
        free=free_cables(state),
        leaf_ok=r >= s // f.gpus_per_server,
        leaf_cost=(r * f.gpus_per_server).astype(float),
        plane_cost=spine_free[np.arange(f.up_ports) % f.spines].astype(float),
        nl=nl,
        s=s,
    )


def clos_placement(state: FabricState, job: JobRequest, sol: ClosSolution) -> Placement:
    """Turn a vClos-ILP solution into GPUs, reserved cables and source-routing entries.

    Rank ``i`` runs on virtual leaf ``i // s`` at its ``i % s``-th GPU and sends up plane
    ``planes[i % s]`` (the aligned layout of §5.3), so every leaf-wise permutation of the job's ranks
    is contention-free inside its own virtual Clos.
    """
    f = state.fabric
    s = len(sol.planes)
    q = s // f.gpus_per_server
    srv = idle_servers(state)
    ports = [ordered_ports(f, np.flatnonzero(srv[n])[:q].tolist()) for n in sol.leaves]
    gpus = aligned_layout(sol.leaves, ports)
    uplink = {g: sol.planes[i % s] for i, g in enumerate(gpus)}
    plane: dict[tuple[int, int], PlaneId] = {(n, p): p for n in sol.leaves for p in sol.planes}
    down: dict[tuple[PlaneId, int], int] = {(p, n): p for n in sol.leaves for p in sol.planes}
    cables = tuple(fixed_cable(f, n, p) for n in sol.leaves for p in sol.planes)
    return Placement(
        job_id=job.job_id,
        requested_gpus=job.gpus,
        stage=Stage.VCLOS,
        gpus=gpus,
        cables=cables,
        routing=SourceRouting(uplink=uplink, plane=plane, downlink=down),
        shape=(len(sol.leaves), s),
    )


def place_clos(state: FabricState, job: JobRequest, *, method: str = "auto") -> Placement | None:
    """vClos stage 2: a virtual Clos with reserved leaf–spine links, by the vClos-ILP per shape.

    ``method`` is ``"ilp"`` (HiGHS), ``"enumerate"`` (exact enumeration of leaf sets) or ``"auto"``
    (enumeration when the leaf sets are few, else the ILP; see :func:`solve_clos`). All are exact;
    an ILP that hits its time limit without a solution counts as infeasible (the job waits).

    References
    ----------
    vClos §6.1 Stage 2; Appendix A.2 (FINDVCLOS, Algorithm 3).
    """
    solvers: dict[str, Callable[[ClosProblem], ClosSolution | None]] = {
        "auto": solve_clos,
        "ilp": solve_clos_ilp,
        "enumerate": brute_force_clos,
    }
    solver = solvers[method]
    for nl, s in clos_shapes(state.fabric, job.gpus):
        sol = solver(clos_problem(state, nl, s))
        if sol is not None:
            return clos_placement(state, job, sol)
    return None


def finish(
    state: FabricState, placement: Placement | None, job: JobRequest, policy: str
) -> tuple[FabricState, Placement]:
    """Commit a found placement, or raise InfeasibleError naming the policy and job."""
    if placement is None:
        raise InfeasibleError(f"{policy}: job {job.job_id!r} ({job.gpus} GPUs) cannot be placed now")
    return commit(state, placement), placement


def allocate_vclos(state: FabricState, job: JobRequest) -> tuple[FabricState, Placement]:
    """Place a job with vClos: stage 0 (N <= T), else stage 1, else stage 2 (ILP).

    Examples
    --------
    >>> from commsched.scheduling.vclos.fabric import Fabric, empty_state
    >>> s = empty_state(Fabric(leaves=4, spines=4, servers_per_leaf=2, gpus_per_server=2))
    >>> s, p = allocate_vclos(s, JobRequest(job_id="a", gpus=4))
    >>> p.stage.value, p.shape, len(p.cables)
    ('leaf', (0, 0), 0)
    >>> s, p = allocate_vclos(s, JobRequest(job_id="b", gpus=12))
    >>> p.stage.value, p.shape, len(p.cables)
    ('vclos', (3, 4), 12)

    Raises
    ------
    InfeasibleError
        When no stage can place the job now (the job waits).

    References
    ----------
    vClos §6.1, Algorithm 1.
    """
    check_request(state, job)
    if job.gpus <= state.fabric.gpus_per_server:
        return finish(state, place_in_server(state, job), job, "vclos")
    placement = place_in_leaf(state, job) or place_clos(state, job)
    return finish(state, placement, job, "vclos")


def allocate_best(state: FabricState, job: JobRequest) -> tuple[FabricState, Placement]:
    """Baseline ``best``: one non-blocking switch joins all servers, so only GPUs matter.

    Stage 0 for N <= T; otherwise the lowest-numbered ceil(N/T) idle servers anywhere (the locality
    constraint is kept; links are never reserved and never contended).

    References
    ----------
    vClos §9.3 (Best).
    """
    check_request(state, job)
    f = state.fabric
    if job.gpus <= f.gpus_per_server:
        return finish(state, place_in_server(state, job), job, "best")
    q = servers_needed(f, job.gpus)
    flat = np.flatnonzero(idle_servers(state).ravel())[:q]
    if len(flat) < q:
        return finish(state, None, job, "best")
    gpus = [g for i in flat.tolist() for g in leaf_gpus(f, i // f.servers_per_leaf, [i % f.servers_per_leaf])]
    return finish(
        state,
        Placement(
            job_id=job.job_id,
            requested_gpus=job.gpus,
            stage=Stage.BEST,
            gpus=tuple(gpus),
            routing=empty_routing(),
        ),
        job,
        "best",
    )


def allocate_packed(state: FabricState, job: JobRequest) -> tuple[FabricState, Placement]:
    """Locality packing without link reservation (placement of ``sr``, ``ecmp`` and variants).

    Stage 0 for N <= T, stage 1 when one leaf fits, else whole idle servers from the leaves with the
    most idle servers first (fewest leaves), ties to the lowest leaf. The routing entries are the
    default source routing (down port i -> up port i) for the job's GPUs; ECMP policies ignore them.

    References
    ----------
    vClos §9.3 (SR, ECMP, Balanced ECMP baselines), §5.2 (default source routing).
    """
    check_request(state, job)
    f = state.fabric
    if job.gpus <= f.gpus_per_server:
        return finish(state, place_in_server(state, job), job, "packed")
    one_leaf = place_in_leaf(state, job)
    if one_leaf is not None:
        return finish(state, one_leaf, job, "packed")
    q = servers_needed(f, job.gpus)
    r = idle_servers_per_leaf(state)
    srv = idle_servers(state)
    gpus: list[GpuAddr] = []
    for leaf in sorted(range(f.leaves), key=lambda n: (-int(r[n]), n)):
        take = np.flatnonzero(srv[leaf])[: q - len(gpus) // f.gpus_per_server].tolist()
        gpus.extend(leaf_gpus(f, leaf, take))
    if len(gpus) < q * f.gpus_per_server:
        return finish(state, None, job, "packed")
    routing = SourceRouting(
        uplink={g: g.port for g in gpus},
        plane={(n, u): u for n in range(f.leaves) for u in range(f.up_ports)},
        downlink={(u, n): u for n in range(f.leaves) for u in range(f.up_ports)},
    )
    return finish(
        state,
        Placement(
            job_id=job.job_id, requested_gpus=job.gpus, stage=Stage.PACKED, gpus=tuple(gpus), routing=routing
        ),
        job,
        "packed",
    )
