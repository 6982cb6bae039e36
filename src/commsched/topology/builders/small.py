"""Small fixed fabrics: the single link of the worked examples and the Crux 12-host testbed."""

from __future__ import annotations

from commsched.topology import checks
from commsched.topology.assembly import Assembler, CableSpec
from commsched.topology.builders.clos import DEFAULT_LATENCY_S
from commsched.topology.graph import Topology
from commsched.topology.hosts import NIC_100G_BPS, NIC_200G_BPS, a100_8gpu_4nic
from commsched.topology.records import LinkKind, NodeKind

ENDPOINT_A_IP = (10 << 24) | (255 << 16) | 1  # 10.255.0.1
ENDPOINT_B_IP = (10 << 24) | (255 << 16) | 2  # 10.255.0.2


def single_link(*, capacity_bps: float = 8e9, latency_s: float = 0.0) -> Topology:
    """Two ENDPOINT nodes ``a`` and ``b`` joined by one full-duplex ABSTRACT link (two directed links).

    There are no hosts: the GPU counts of the worked examples are abstract numbers.

    Parameters
    ----------
    capacity_bps
        Link speed in bits/s, each direction (default 8e9 = 1 GB/s, the unit of the Crux examples).
    latency_s
        Link latency, seconds.

    Examples
    --------
    >>> topo = single_link()
    >>> topo.link_id("a", "b"), topo.link_id("b", "a"), float(topo.capacity_bps[0])
    (0, 1, 8000000000.0)

    References
    ----------
    Crux (SIGCOMM'24) §3 and reference/crux-spec.md §1.4 (single-link reduction, worked examples).
    """
    spec = CableSpec(
        capacity_bps=checks.rate("capacity_bps", capacity_bps),
        latency_s=checks.seconds("latency_s", latency_s),
    )
    asm = Assembler("single_link")
    a = asm.node("a", NodeKind.ENDPOINT, ip=ENDPOINT_A_IP)
    b = asm.node("b", NodeKind.ENDPOINT, ip=ENDPOINT_B_IP)
    asm.cable(a, b, spec, LinkKind.ABSTRACT)
    return asm.finish({"kind": "single_link", "capacity_bps": spec.capacity_bps, "latency_s": spec.latency_s})


def crux_testbed(
    *,
    host_link_bps: float = NIC_200G_BPS,
    uplink_bps: float = NIC_100G_BPS,
    latency_s: float = DEFAULT_LATENCY_S,
) -> Topology:
    """The Crux testbed (Fig. 18): 12 hosts x 8 A100 (96 GPUs), 4 x 200 Gb/s NICs per host, 6 ToR, 8 Agg.

    Choices for what the paper leaves open (reference/crux-spec.md §6.1):

    * Hosts are ``a100_8gpu_4nic`` (every two GPUs share a NIC: GPU ``g`` uses NIC ``g // 2``).
    * Rail-style wiring in three blocks of four hosts: host ``h`` is in block ``b = h // 4`` and its NIC
      ``i`` goes to ToR ``2b + i % 2`` (GPU0&1 -> one switch, GPU2&3 -> another, as in the text). Every
      ToR gets 4 hosts x 2 NICs = its 8 host-facing ports; 12 x 4 = 48 host links = 6 x 8 ports.
    * Every ToR has one 100 Gb/s uplink to each of the 8 Aggs (the figure's "8x100 Gbps" per ToR), so a
      ToR has 1.6 Tb/s down and 0.8 Tb/s up: 2:1 oversubscription, where the paper's ToR-Agg contention
      arises. NICs of different ToRs have 8 equal-cost paths.

    Parameters
    ----------
    host_link_bps, uplink_bps
        NIC-ToR and ToR-Agg speeds in bits/s.
    latency_s
        Latency of every network link, seconds.

    Examples
    --------
    >>> topo = crux_testbed()
    >>> topo.n_gpus, topo.host("h5").tors, len(topo.equal_cost_paths("h0/nic0", "h0/nic1"))
    (96, ('tor2', 'tor3'), 8)

    References
    ----------
    Crux (SIGCOMM'24) §6.1, Fig. 18; reference/crux-spec.md §6.1.
    """
    lat = checks.seconds("latency_s", latency_s)
    down = CableSpec(capacity_bps=checks.rate("host_link_bps", host_link_bps), latency_s=lat)
    up = CableSpec(capacity_bps=checks.rate("uplink_bps", uplink_bps), latency_s=lat)
    tmpl = a100_8gpu_4nic()
    asm = Assembler("crux_testbed")
    tors = asm.switches("tor", 6, NodeKind.TOR)
    aggs = asm.switches("agg", 8, NodeKind.AGG)
    for h in range(12):
        asm.host(tmpl, h, [[tors[2 * (h // 4) + i % 2]] for i in range(tmpl.n_nics)], down)
    asm.mesh(tors, aggs, 1, up)
    return asm.finish(
        {
            "kind": "crux_testbed",
            "host_link_bps": down.capacity_bps,
            "uplink_bps": up.capacity_bps,
            "latency_s": lat,
        }
    )
