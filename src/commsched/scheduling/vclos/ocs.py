"""OCS-vClos placement: stages 0-1 as vClos, stage 2 (one spine by rewired circuits), stage 3 (ILP).

Only idle links are rewired (a circuit joins an idle leaf up port and an idle spine port on the same
OCS); circuits of running jobs are never touched (§7).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from commsched.errors import InputError
from commsched.scheduling.vclos.fabric import (
    Cable,
    FabricState,
    GpuAddr,
    JobRequest,
    Placement,
    PlaneId,
    SourceRouting,
    Stage,
    free_cables,
    free_spine_ports,
    idle_servers,
    idle_servers_per_leaf,
)
from commsched.scheduling.vclos.ilp import OcsProblem, OcsSolution, solve_ocs_ilp
from commsched.scheduling.vclos.placement import finish, place_in_leaf, place_in_server
from commsched.scheduling.vclos.state import check_request, clos_shapes, leaf_gpus, servers_needed


class _Ports:
    """Idle ports of one switch side, by OCS group, handed out lowest first (local scratch)."""

    def __init__(self, free: NDArray[np.bool_], groups: int) -> None:
        idx = np.flatnonzero(free)
        self.by_group = [[int(i) for i in idx if i % groups == k] for k in range(groups)]

    def count(self, k: int) -> int:
        return len(self.by_group[k])

    def take(self, k: int) -> int:
        return self.by_group[k].pop(0)


def _star(state: FabricState, spine: int, q: int) -> list[tuple[GpuAddr, Cable]] | None:
    """Circuits from ``q`` whole idle servers to one spine, one circuit per GPU, or None."""
    f, k_n = state.fabric, state.fabric.ocs_groups
    sp = _Ports(free_spine_ports(state)[spine], k_n)
    leaf_free = free_cables(state)
    srv = idle_servers(state)
    r = idle_servers_per_leaf(state)
    out: list[tuple[GpuAddr, Cable]] = []
    for leaf in sorted((n for n in range(f.leaves) if r[n] > 0), key=lambda n: (int(r[n]), n)):
        lp = _Ports(leaf_free[leaf], k_n)
        for server in np.flatnonzero(srv[leaf]).tolist():
            got: list[tuple[GpuAddr, Cable]] = []
            for g in leaf_gpus(f, leaf, [server]):
                k = next((k for k in range(k_n) if lp.count(k) and sp.count(k)), None)
                if k is None:
                    break
                got.append((g, Cable(leaf=leaf, port=lp.take(k), spine=spine, spine_port=sp.take(k))))
            if len(got) < f.gpus_per_server:
                for _, c in reversed(got):  # give the spine ports back and try the next leaf
                    sp.by_group[c.spine_port % k_n].insert(0, c.spine_port)
                break
            out.extend(got)
            if len(out) == q * f.gpus_per_server:
                return out
    return None


def place_on_spine(state: FabricState, job: JobRequest) -> Placement | None:
    """OCS-vClos stage 2: every GPU of the job gets its own circuit to one spine.

    The spine with the fewest but enough idle ports is tried first (Algorithm 2, lines 13-22); the
    job's servers are taken from leaves with the fewest idle servers first. Any permutation of the
    job's ranks is then contention-free (each GPU has a private up and down circuit).

    References
    ----------
    vClos §7.2, Algorithm 2.
    """
    f = state.fabric
    q = servers_needed(f, job.gpus)
    free = free_spine_ports(state).sum(axis=1)
    for spine in sorted(
        np.flatnonzero(free >= q * f.gpus_per_server).tolist(), key=lambda m: (int(free[m]), m)
    ):
        star = _star(state, spine, q)
        if star is None:
            continue
        plane: PlaneId = f"{job.job_id}:0"
        routing = SourceRouting(
            uplink={g: c.port for g, c in star},
            plane={(c.leaf, c.port): plane for _, c in star},
            downlink_gpu={(plane, g): c.port for g, c in star},
        )
        return Placement(
            job_id=job.job_id,
            requested_gpus=job.gpus,
            stage=Stage.OCS_SPINE,
            gpus=tuple(g for g, _ in star),
            cables=tuple(c for _, c in star),
            routing=routing,
        )
    return None


def ocs_problem(state: FabricState, nl: int, s: int) -> OcsProblem:
    """The OCS-vClos-ILP inputs of the current state for shape ``(l, s)``."""
    f = state.fabric
    k = f.ocs_groups
    r = idle_servers_per_leaf(state)
    leaf_free = free_cables(state)
    spine_free = free_spine_ports(state)

    def by_group(free: NDArray[np.bool_]) -> NDArray[np.int64]:
        return np.stack([free[:, g::k].sum(axis=1) for g in range(k)], axis=1).astype(np.int64)

    return OcsProblem(
        leaf_slots=(r // (s // f.gpus_per_server)).astype(np.int64),
        leaf_free=by_group(leaf_free),
        spine_free=by_group(spine_free),
        leaf_cost=(r * f.gpus_per_server).astype(float),
        spine_cost=spine_free.sum(axis=1).astype(float),
        nl=nl,
        s=s,
    )


def _ocs_clos_placement(state: FabricState, job: JobRequest, sol: OcsSolution, s: int) -> Placement:
    f = state.fabric
    q = s // f.gpus_per_server
    srv = idle_servers(state)
    lp = [_Ports(row, f.ocs_groups) for row in free_cables(state)]
    sp = [_Ports(row, f.ocs_groups) for row in free_spine_ports(state)]
    vspines = [m for m in range(f.spines) for _ in range(int(sol.vspines[m]))]
    gpus: list[GpuAddr] = []
    ups: list[list[int]] = []  # ups[vleaf][vspine] = leaf port
    cables: list[Cable] = []
    for n in range(f.leaves):
        for a in range(int(sol.vleaves[n].sum())):
            servers = np.flatnonzero(srv[n])[a * q : (a + 1) * q].tolist()
            gpus.extend(leaf_gpus(f, n, servers))
            groups = {
                m: [k for k in range(f.ocs_groups) for _ in range(int(sol.circuits[n, a, m, k]))]
                for m in set(vspines)
            }
            row: list[int] = []
            for m in vspines:
                k = groups[m].pop(0)
                c = Cable(leaf=n, port=lp[n].take(k), spine=m, spine_port=sp[m].take(k))
                cables.append(c)
                row.append(c.port)
            ups.append(row)
    planes: list[PlaneId] = [f"{job.job_id}:{v}" for v in range(s)]
    uplink = {g: ups[i // s][i % s] for i, g in enumerate(gpus)}
    plane = {(gpus[j * s].leaf, ups[j][v]): planes[v] for j in range(len(ups)) for v in range(s)}
    down = {(planes[v], g): ups[i // s][v] for i, g in enumerate(gpus) for v in range(s)}
    return Placement(
        job_id=job.job_id,
        requested_gpus=job.gpus,
        stage=Stage.OCS_VCLOS,
        gpus=tuple(gpus),
        cables=tuple(cables),
        routing=SourceRouting(uplink=uplink, plane=plane, downlink_gpu=down),
        shape=(len(ups), s),
    )


def place_ocs_clos(state: FabricState, job: JobRequest, *, presolve: bool = True) -> Placement | None:
    """OCS-vClos stage 3: a multi-spine virtual Clos over rewirable idle links (OCS-vClos-ILP).

    A leaf may host several virtual leaves and a spine several virtual spines of one job (L_{n,a},
    s_m of Appendix A.3).

    References
    ----------
    vClos §7.3; Appendix A.3 (OCSFINDCLOS, Algorithm 4).
    """
    f = state.fabric
    for nl, s in clos_shapes(f, job.gpus, max_vleaves_per_leaf=f.servers_per_leaf):
        sol = solve_ocs_ilp(ocs_problem(state, nl, s), presolve=presolve)
        if sol is not None:
            return _ocs_clos_placement(state, job, sol, s)
    return None


def allocate_ocs_vclos(state: FabricState, job: JobRequest) -> tuple[FabricState, Placement]:
    """Place a job with OCS-vClos: stage 0, stage 1, stage 2 (one spine), stage 3 (ILP).

    Examples
    --------
    >>> from commsched.scheduling.vclos.fabric import Fabric, empty_state
    >>> s = empty_state(Fabric(leaves=8, spines=4, servers_per_leaf=2, gpus_per_server=2, ocs_groups=1))
    >>> s, p = allocate_ocs_vclos(s, JobRequest(job_id="a", gpus=6))
    >>> p.stage.value, len(p.cables)
    ('ocs-spine', 6)

    Raises
    ------
    InputError
        When the fabric has no OCS layer.
    InfeasibleError
        When no stage can place the job now.

    References
    ----------
    vClos §7, Algorithm 2.
    """
    if not state.fabric.has_ocs:
        raise InputError(
            "OCS-vClos needs a fabric with an OCS layer", where="Fabric.ocs_groups", expected=">= 1"
        )
    check_request(state, job)
    if job.gpus <= state.fabric.gpus_per_server:
        return finish(state, place_in_server(state, job), job, "ocs-vclos")
    placement = place_in_leaf(state, job) or place_on_spine(state, job) or place_ocs_clos(state, job)
    return finish(state, placement, job, "ocs-vclos")
