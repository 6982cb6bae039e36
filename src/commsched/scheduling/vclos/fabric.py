"""The abstract leaf-spine fabric of vClos and its occupancy state.

Conventions
-----------
* A leaf has ``down_ports = servers_per_leaf * gpus_per_server`` server-facing ports, one per GPU
  (each GPU has its own NIC, vClos §4.1); down port ``p`` is GPU ``p % T`` of server ``p // T``.
* A leaf has ``up_ports = spines * cables_per_pair`` spine-facing ports. With fixed cabling, up port
  ``u`` is cable number ``u // spines`` to spine ``u % spines``; that spine sees it on its port
  ``leaf * cables_per_pair + u // spines``. Up port ``u`` of every leaf forms *plane* ``u``: with
  ``cables_per_pair = 1`` a plane is a spine; with more, each parallel cable set is a plane that
  behaves as a spine of its own (the spine forwards plane-``u`` traffic on plane-``u`` cables).
* Every leaf–spine cable is identified by its leaf end ``(leaf, up port)``.
* With ``ocs_groups = K >= 1`` the leaf–spine layer runs through ``K`` optical circuit switches:
  leaf up port ``u`` and spine port ``p`` attach to OCS ``u % K`` and ``p % K``; an idle leaf port
  and an idle spine port on the same OCS can be joined by a circuit (OCS-vClos §7).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from numpy.typing import NDArray

from commsched.errors import InputError

PlaneId = int | str


@dataclass(frozen=True, slots=True, kw_only=True)
class Fabric:
    """A leaf-spine (folded Clos) fabric, optionally with an OCS layer between leaves and spines.

    Examples
    --------
    >>> f = Fabric(leaves=4, spines=4, servers_per_leaf=2, gpus_per_server=2)
    >>> f.n_gpus, f.down_ports, f.up_ports
    (16, 4, 4)

    References
    ----------
    vClos §4.1 (architecture, one NIC per GPU, half the leaf ports up), §7 (OCS layer).
    """

    leaves: int
    spines: int
    servers_per_leaf: int
    gpus_per_server: int
    cables_per_pair: int = 1
    ocs_groups: int = 0

    def __post_init__(self) -> None:
        for name in ("leaves", "spines", "servers_per_leaf", "gpus_per_server", "cables_per_pair"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be at least 1", where=f"Fabric.{name}", expected=">= 1")
        if self.ocs_groups < 0:
            raise InputError("ocs_groups must be >= 0", where="Fabric.ocs_groups", expected=">= 0")
        if self.up_ports < self.down_ports:
            raise InputError(
                f"leaf has {self.down_ports} server ports but only {self.up_ports} spine ports",
                where="Fabric",
                expected="spines * cables_per_pair >= servers_per_leaf * gpus_per_server",
            )

    @property
    def down_ports(self) -> int:
        return self.servers_per_leaf * self.gpus_per_server

    @property
    def up_ports(self) -> int:
        return self.spines * self.cables_per_pair

    @property
    def spine_ports(self) -> int:
        return self.leaves * self.cables_per_pair

    @property
    def n_gpus(self) -> int:
        return self.leaves * self.down_ports

    @property
    def n_servers(self) -> int:
        return self.leaves * self.servers_per_leaf

    @property
    def has_ocs(self) -> bool:
        return self.ocs_groups > 0


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class GpuAddr:
    """A GPU named by its leaf and the leaf's server-facing port it hangs off."""

    leaf: int
    port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Flow:
    """One flow of a traffic pattern, ``src -> dst``."""

    src: GpuAddr
    dst: GpuAddr


@dataclass(frozen=True, slots=True, kw_only=True)
class Cable:
    """A reserved leaf–spine link (a fixed cable, or an OCS circuit), bidirectional."""

    leaf: int
    port: int  # the leaf's up port
    spine: int
    spine_port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceRouting:
    """Source routing (vClos §5.2) as lookup tables.

    ``uplink`` is the leaf map f_m: a server-facing port to a spine-facing port. ``plane`` names the
    virtual spine an up port leads to; the spine forwards a packet of plane ``p`` to destination leaf
    ``d`` on leaf ``d``'s up port ``downlink[(p, d)]``, or ``downlink_gpu[(p, dst)]`` where the
    destination GPU has its own circuit (OCS single-spine stage).
    """

    uplink: Mapping[GpuAddr, int]
    plane: Mapping[tuple[int, int], PlaneId]
    downlink: Mapping[tuple[PlaneId, int], int] = field(default_factory=dict)
    downlink_gpu: Mapping[tuple[PlaneId, GpuAddr], int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRequest:
    """What placement needs to know about a job: its id, GPU count, arrival and optional deadline."""

    job_id: str
    gpus: int
    arrival_s: float = 0.0
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise InputError(
                f"job {self.job_id!r} asks for {self.gpus} GPUs", where="JobRequest.gpus", expected=">= 1"
            )


class Stage(StrEnum):
    """Which stage of vClos / OCS-vClos (or which baseline) produced a placement."""

    SERVER = "server"  # stage 0
    LEAF = "leaf"  # stage 1
    VCLOS = "vclos"  # vClos stage 2 (ILP)
    OCS_SPINE = "ocs-spine"  # OCS-vClos stage 2 (one spine through rewired circuits)
    OCS_VCLOS = "ocs-vclos"  # OCS-vClos stage 3 (ILP)
    PACKED = "packed"  # locality packing without reservation (sr, ecmp baselines)
    BEST = "best"  # one big non-blocking switch


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """Where a job runs: its GPUs in rank order, the links reserved for it and its routing entries.

    ``gpus`` holds every GPU reserved for the job (whole servers when the job spans servers, so
    ``len(gpus) >= requested_gpus``); ranks ``0..requested_gpus-1`` run on ``gpus[:requested_gpus]``.
    ``shape`` is ``(l, s)``: virtual leaves and GPUs per virtual leaf (= virtual spines) for virtual
    Clos stages, else ``(0, 0)``.
    """

    job_id: str
    requested_gpus: int
    stage: Stage
    gpus: tuple[GpuAddr, ...]
    cables: tuple[Cable, ...] = ()
    routing: SourceRouting | None = None
    shape: tuple[int, int] = (0, 0)

    @property
    def ranks(self) -> tuple[GpuAddr, ...]:
        return self.gpus[: self.requested_gpus]


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricState:
    """Occupancy of a fabric: owner of every GPU, leaf up port and spine port; placements by job.

    Build with :func:`empty_state`; change only through ``allocate``/``release`` (pure functions that
    return a new state).
    """

    fabric: Fabric
    gpu_owner: tuple[str | None, ...]  # index leaf * down_ports + port
    cable_owner: tuple[str | None, ...]  # index leaf * up_ports + up port
    spine_port_owner: tuple[str | None, ...]  # index spine * spine_ports + spine port
    placements: Mapping[str, Placement]


def empty_state(fabric: Fabric) -> FabricState:
    """An idle fabric.

    Examples
    --------
    >>> s = empty_state(Fabric(leaves=2, spines=2, servers_per_leaf=1, gpus_per_server=2))
    >>> idle_servers_per_leaf(s).tolist()
    [1, 1]
    """
    return FabricState(
        fabric=fabric,
        gpu_owner=(None,) * fabric.n_gpus,
        cable_owner=(None,) * (fabric.leaves * fabric.up_ports),
        spine_port_owner=(None,) * (fabric.spines * fabric.spine_ports),
        placements={},
    )


def _free(owner: tuple[str | None, ...]) -> NDArray[np.bool_]:
    return np.fromiter((o is None for o in owner), dtype=bool, count=len(owner))


def idle_gpus(state: FabricState) -> NDArray[np.bool_]:
    """Boolean array ``[leaf, server, gpu]``: True where the GPU is idle."""
    f = state.fabric
    return _free(state.gpu_owner).reshape(f.leaves, f.servers_per_leaf, f.gpus_per_server)


def idle_gpus_per_server(state: FabricState) -> NDArray[np.int64]:
    """Idle GPUs per server, shape ``[leaf, server]``."""
    return np.asarray(idle_gpus(state).sum(axis=2), dtype=np.int64)


def idle_servers(state: FabricState) -> NDArray[np.bool_]:
    """True for servers whose GPUs are all idle, shape ``[leaf, server]``."""
    return np.asarray(idle_gpus(state).all(axis=2), dtype=bool)


def idle_servers_per_leaf(state: FabricState) -> NDArray[np.int64]:
    """R_n of Table 1: whole idle servers per leaf."""
    return np.asarray(idle_servers(state).sum(axis=1), dtype=np.int64)


def free_cables(state: FabricState) -> NDArray[np.bool_]:
    """Free leaf up ports (C_{n,m} of Table 1 by plane), shape ``[leaf, up port]``."""
    f = state.fabric
    return _free(state.cable_owner).reshape(f.leaves, f.up_ports)


def free_spine_ports(state: FabricState) -> NDArray[np.bool_]:
    """Free spine ports, shape ``[spine, spine port]``."""
    f = state.fabric
    return _free(state.spine_port_owner).reshape(f.spines, f.spine_ports)


def fixed_cable(fabric: Fabric, leaf: int, port: int) -> Cable:
    """The fixed cable behind leaf ``leaf``'s up port ``port`` (uniform wiring)."""
    return Cable(
        leaf=leaf,
        port=port,
        spine=port % fabric.spines,
        spine_port=leaf * fabric.cables_per_pair + port // fabric.spines,
    )


def gpu_index(fabric: Fabric, gpu: GpuAddr) -> int:
    """Flat index of a GPU in ``FabricState.gpu_owner``."""
    return gpu.leaf * fabric.down_ports + gpu.port
