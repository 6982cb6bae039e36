"""Views of a :class:`~commsched.scheduling.interfaces.PlacementRequest` shared by the job schedulers:
free GPUs per host, the ToR and pod (aggregation group) of each host, rank order of an allocation."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from commsched.scheduling.interfaces import PlacementRequest
from commsched.topology import Host, NodeId, NodeKind, Topology


@dataclass(frozen=True, slots=True, kw_only=True)
class HostView:
    """A host with its free GPUs (in host order), its ToR key, pod key and position in the topology."""

    host: Host
    free: tuple[NodeId, ...]
    tor: str
    pod: str
    order: int

    @property
    def size(self) -> int:
        return len(self.host.gpus)

    @property
    def whole(self) -> bool:
        """Every GPU of the host is free."""
        return len(self.free) == len(self.host.gpus)


def pod_of(topology: Topology, tor: NodeId) -> str:
    """The pod of a ToR: the sorted aggregation switches it is cabled to (``""`` for none).

    ToRs cabled to the same aggregation switches form one pod (a two-layer Clos is one pod; a Lingjun
    PSW is one pod).
    """
    aggs = sorted(
        {str(lk.dst) for lk in topology.out_links(tor) if topology.node(lk.dst).kind is NodeKind.AGG}
    )
    return ",".join(aggs)


def host_views(req: PlacementRequest) -> list[HostView]:
    """Every host of the topology with its free GPUs, in topology host order."""
    pods: dict[NodeId, str] = {}
    out = []
    for i, h in enumerate(req.topology.hosts):
        tor = h.tors[0] if h.tors else NodeId("")
        if tor not in pods:
            pods[tor] = pod_of(req.topology, tor) if tor else ""
        free = tuple(g for g in h.gpus if g in req.free_gpus)
        out.append(HostView(host=h, free=free, tor=str(tor), pod=pods[tor], order=i))
    return out


def by_key(views: list[HostView], *, pod: bool = False) -> dict[str, list[HostView]]:
    """Hosts grouped by ToR (or by pod), groups and hosts in topology order."""
    out: dict[str, list[HostView]] = defaultdict(list)
    for v in views:
        out[v.pod if pod else v.tor].append(v)
    return dict(out)


def rank_order(topology: Topology, gpus: list[NodeId]) -> tuple[NodeId, ...]:
    """GPUs in topology order, so consecutive ranks share a host."""
    pos = {g: i for i, g in enumerate(topology.gpus)}
    return tuple(sorted(gpus, key=lambda g: pos[g]))
