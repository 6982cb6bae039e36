"""Facts about a topology: counts by kind, ToR oversubscription, sample equal-cost path counts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from commsched.errors import TopologyError
from commsched.topology.graph import Topology
from commsched.topology.records import LinkKind, NodeId, NodeKind


def oversubscription(topology: Topology) -> float | None:
    """The worst ToR oversubscription: max over ToRs of host-facing / switch-facing capacity.

    Host-facing capacity is the sum of the ToR's ACCESS links towards NICs, switch-facing the sum of its
    outgoing FABRIC links. ``None`` when the topology has no ToR with both.

    Examples
    --------
    >>> from commsched.topology.builders import crux_testbed
    >>> oversubscription(crux_testbed())
    2.0
    """
    worst: float | None = None
    for tor in topology.nodes_of_kind(NodeKind.TOR):
        down = sum(lk.capacity_bps for lk in topology.out_links(tor.id) if lk.kind is LinkKind.ACCESS)
        up = sum(lk.capacity_bps for lk in topology.out_links(tor.id) if lk.kind is LinkKind.FABRIC)
        if down > 0 and up > 0:
            ratio = down / up
            worst = ratio if worst is None else max(worst, ratio)
    return worst


@dataclass(frozen=True, slots=True, kw_only=True)
class PathSample:
    """The number of equal-cost paths between two NICs (or endpoints), and why that pair."""

    src: NodeId
    dst: NodeId
    relation: str
    n_paths: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologySummary:
    """What ``commsched topology show`` prints."""

    name: str
    hosts: int
    gpus: int
    nics: int
    nodes_by_kind: dict[str, int]
    links_by_kind: dict[str, int]
    oversubscription: float | None
    path_samples: tuple[PathSample, ...]
    params: dict[str, object]

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "hosts": self.hosts,
            "gpus": self.gpus,
            "nics": self.nics,
            "nodes_by_kind": self.nodes_by_kind,
            "links_by_kind": self.links_by_kind,
            "oversubscription": self.oversubscription,
            "path_samples": [
                {"src": s.src, "dst": s.dst, "relation": s.relation, "n_paths": s.n_paths}
                for s in self.path_samples
            ],
            "params": self.params,
        }


def _sample_pairs(topology: Topology) -> list[tuple[NodeId, NodeId, str]]:
    """Pairs of NICs: first NIC of host 0 against the first NIC on another ToR, Agg group and Core group."""
    if not topology.hosts:
        ends = [n.id for n in topology.nodes_of_kind(NodeKind.ENDPOINT)]
        return [(ends[0], ends[1], "endpoints")] if len(ends) >= 2 else []
    src = topology.hosts[0].nics[0]
    src_tors = set(topology.attached_switches(src))
    out: list[tuple[NodeId, NodeId, str]] = []
    seen_hops: set[int] = set()
    seen_tors: set[tuple[NodeId, ...]] = set()
    for h in topology.hosts:
        for nic in h.nics:
            tors = topology.attached_switches(nic)
            if tors in seen_tors or not src_tors.isdisjoint(tors):
                continue
            seen_tors.add(tors)
            hops = len(topology.equal_cost_paths(src, nic)[0].links)
            if hops not in seen_hops:
                seen_hops.add(hops)
                out.append((src, nic, f"different ToR, {hops} hops"))
    return out


def summarize(topology: Topology) -> TopologySummary:
    """Counts by kind, oversubscription and sample path counts of a topology."""
    samples: list[PathSample] = []
    for a, b, why in _sample_pairs(topology):
        try:
            n = len(topology.equal_cost_paths(a, b))
        except TopologyError:
            n = 0
        samples.append(PathSample(src=a, dst=b, relation=why, n_paths=n))
    return TopologySummary(
        name=topology.name,
        hosts=len(topology.hosts),
        gpus=topology.n_gpus,
        nics=sum(len(h.nics) for h in topology.hosts),
        nodes_by_kind=dict(sorted(Counter(str(n.kind) for n in topology.nodes).items())),
        links_by_kind=dict(sorted(Counter(str(lk.kind) for lk in topology.links).items())),
        oversubscription=oversubscription(topology),
        path_samples=tuple(samples),
        params=dict(topology.params),
    )
