"""Typed frozen records of the physical cluster: nodes, directed links, hosts, paths.

Conventions
-----------
* Links are directed; a full-duplex cable is two links, one each way.
* ``capacity_bps`` is in **bits** per second, ``latency_s`` in seconds.
* Node ids are readable strings (``"h3/gpu5"``, ``"tor2"``); link ids are dense integers ``0..L-1`` so
  that per-link quantities live in NumPy arrays indexed by ``LinkId``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NewType

NodeId = NewType("NodeId", str)
LinkId = NewType("LinkId", int)
HostId = NewType("HostId", str)


class NodeKind(StrEnum):
    """What a node is. Hosts contain GPU, CPU, PCIe-switch, NVSwitch and NIC nodes."""

    GPU = "gpu"
    CPU = "cpu"
    PCIE_SWITCH = "pcie_switch"
    NVSWITCH = "nvswitch"
    NIC = "nic"
    ENDPOINT = "endpoint"  # abstract end of a single link (worked examples)
    TOR = "tor"  # ToR / leaf / ASW
    AGG = "agg"  # aggregation / spine / PSW
    CORE = "core"  # core / DSW
    OCS = "ocs"  # optical circuit switch


class LinkKind(StrEnum):
    """Which part of the cluster a link belongs to (metrics are split by it, as in Crux Fig. 24)."""

    NVLINK = "nvlink"
    PCIE = "pcie"
    ACCESS = "access"  # NIC <-> ToR
    FABRIC = "fabric"  # switch <-> switch (ToR-Agg, Agg-Core, leaf-OCS-spine)
    ABSTRACT = "abstract"  # the single link of the worked examples


NETWORK_LINK_KINDS: frozenset[LinkKind] = frozenset({LinkKind.ACCESS, LinkKind.FABRIC, LinkKind.ABSTRACT})
INTRA_HOST_LINK_KINDS: frozenset[LinkKind] = frozenset({LinkKind.NVLINK, LinkKind.PCIE})


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """A vertex of the cluster graph.

    ``host`` is set for nodes inside a host; ``ip`` (an IPv4 address as an int) is set for NICs and
    endpoints, which are the ends of network connections.
    """

    id: NodeId
    kind: NodeKind
    host: HostId | None = None
    ip: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """A directed link ``src -> dst``."""

    id: LinkId
    src: NodeId
    dst: NodeId
    capacity_bps: float
    latency_s: float
    kind: LinkKind


@dataclass(frozen=True, slots=True, kw_only=True)
class Host:
    """A server: its GPUs and NICs, and which NIC each GPU uses (its nearest one).

    ``tors`` lists the distinct switches the host's NICs are cabled to, in the order of first
    attachment (NIC by NIC): one ToR for a Clos host, two for a dual-homed host, one per rail for
    rail-style wiring. ``label`` is an external key of the host (the Lingjun ``ip`` hash), or ``""``.
    """

    id: HostId
    template: str
    gpus: tuple[NodeId, ...]
    nics: tuple[NodeId, ...]
    gpu_nic: tuple[NodeId, ...]  # gpu_nic[i] is the NIC of gpus[i]
    tors: tuple[NodeId, ...] = ()  # distinct ToRs the NICs attach to, in order of first attachment
    label: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Path:
    """A route as the nodes it visits and the directed links it takes (``len(links) == len(nodes) - 1``)."""

    nodes: tuple[NodeId, ...]
    links: tuple[LinkId, ...]

    @property
    def hops(self) -> int:
        return len(self.links)
