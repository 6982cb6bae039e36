"""Clos fabrics: the two-layer ToR/Agg Clos and the three-layer double-sided (dual-homed) Clos.

References
----------
Crux (SIGCOMM'24) §6.4 / reference/crux-spec.md §6.4 (double-sided 6 ToR / 12 Agg / 32 Core fabric,
hosts dual-homed over eight links; two-layer Clos).
"""

from __future__ import annotations

from commsched.topology import checks
from commsched.topology.assembly import Assembler, CableSpec
from commsched.topology.graph import Topology
from commsched.topology.hosts import HostTemplate, resolve_template
from commsched.topology.records import NodeKind

DEFAULT_LATENCY_S = 1e-6  # one switch hop plus cable, seconds


def _cables_per_nic(links_per_host: object, template: HostTemplate) -> tuple[int, int]:
    links = checks.count("links_per_host", links_per_host)
    return links, checks.multiple(
        "links_per_host", links, template.n_nics, f"the {template.n_nics} NICs per host"
    )


def two_layer_clos(
    *,
    tors: int = 4,
    aggs: int = 2,
    hosts_per_tor: int = 4,
    host_template: str | HostTemplate = "a100_8gpu_4nic",
    links_per_host: int | None = None,
    uplinks_per_tor: int | None = None,
    host_link_bps: float | None = None,
    uplink_bps: float | None = None,
    latency_s: float = DEFAULT_LATENCY_S,
) -> Topology:
    """A two-layer Clos: hosts under ToRs (``tor{i}``), every ToR cabled to every Agg (``agg{j}``).

    Parameters
    ----------
    tors
        ToR (leaf) switches, ``tor0`` ... Host ``h`` sits under ToR ``h // hosts_per_tor``.
    aggs
        Agg (spine) switches, ``agg0`` ...; every ToR is cabled to every Agg.
    hosts_per_tor
        Hosts under each ToR.
    host_template
        A template name (see :func:`commsched.topology.hosts.host_templates`) or object.
    links_per_host
        Host-to-ToR cables; default one per NIC. A multiple ``m`` of the NIC count gives every NIC
        ``m`` parallel cables to its ToR.
    uplinks_per_tor
        ToR-to-Agg cables per ToR, spread evenly over the Aggs (must be a multiple of ``aggs``);
        default ``hosts_per_tor * links_per_host`` (as many uplinks as downlinks) rounded up to a
        multiple of ``aggs``.
    host_link_bps
        Speed of a host-to-ToR cable in bits/s (each direction); default the template's NIC rate.
    uplink_bps
        Speed of a ToR-to-Agg cable in bits/s (each direction); default the template's NIC rate (so the
        default fabric is 1:1, non-oversubscribed).
    latency_s
        Latency of every network link, seconds.

    Returns
    -------
    Topology
        ``params`` holds the resolved parameters. Between NICs under different ToRs there are
        ``aggs * p**2`` equal-cost paths (``p = uplinks_per_tor / aggs`` parallel cables per ToR-Agg pair;
        ECMP picks an uplink at the ToR and a downlink at the Agg). Oversubscription:
        :func:`commsched.topology.summary.oversubscription`.

    Examples
    --------
    >>> topo = two_layer_clos()
    >>> topo.n_gpus, len(topo.nodes_of_kind(NodeKind.TOR)), len(topo.equal_cost_paths("h0/nic0", "h4/nic0"))
    (128, 4, 128)

    References
    ----------
    Crux (SIGCOMM'24) §6.4 (two-layer Clos).
    """
    tmpl = resolve_template(host_template)
    n_tor, n_agg, hpt = (
        checks.count("tors", tors),
        checks.count("aggs", aggs),
        checks.count("hosts_per_tor", hosts_per_tor),
    )
    links, per_nic = _cables_per_nic(tmpl.n_nics if links_per_host is None else links_per_host, tmpl)
    auto_ups = -(-hpt * links // n_agg) * n_agg  # downlinks rounded up to a multiple of aggs
    ups = checks.count("uplinks_per_tor", auto_ups if uplinks_per_tor is None else uplinks_per_tor)
    parallel = checks.multiple("uplinks_per_tor", ups, n_agg, f"aggs={n_agg}")
    down = CableSpec(
        capacity_bps=checks.rate("host_link_bps", host_link_bps or tmpl.nic_bps),
        latency_s=checks.seconds("latency_s", latency_s),
    )
    up = CableSpec(
        capacity_bps=checks.rate("uplink_bps", uplink_bps or down.capacity_bps), latency_s=down.latency_s
    )
    asm = Assembler(f"two_layer_clos_{n_tor}x{n_agg}")
    tor_ids = asm.switches("tor", n_tor, NodeKind.TOR)
    agg_ids = asm.switches("agg", n_agg, NodeKind.AGG)
    for h in range(n_tor * hpt):
        asm.host(tmpl, h, [[tor_ids[h // hpt]] * per_nic] * tmpl.n_nics, down)
    asm.mesh(tor_ids, agg_ids, parallel, up)
    return asm.finish(
        {
            "kind": "two_layer_clos",
            "tors": n_tor,
            "aggs": n_agg,
            "hosts_per_tor": hpt,
            "host_template": tmpl.name,
            "links_per_host": links,
            "uplinks_per_tor": ups,
            "host_link_bps": down.capacity_bps,
            "uplink_bps": up.capacity_bps,
            "latency_s": down.latency_s,
        }
    )


def three_layer_double_sided(
    *,
    tors: int = 6,
    aggs: int = 12,
    cores: int = 32,
    pods: int = 3,
    hosts_per_tor_pair: int = 16,
    host_template: str | HostTemplate = "rail_8gpu",
    links_per_host: int = 8,
    uplinks_per_tor: int | None = None,
    host_link_bps: float | None = None,
    tor_agg_bps: float | None = None,
    agg_core_bps: float | None = None,
    latency_s: float = DEFAULT_LATENCY_S,
) -> Topology:
    """A three-layer ToR-Agg-Core Clos whose hosts are dual-homed to a ToR pair (the Crux trace fabric).

    Parameters
    ----------
    tors
        ToR switches, an even number: ToRs ``2q`` and ``2q + 1`` form pair ``q``.
    aggs, cores, pods
        The ToR pairs and the Aggs are split evenly into ``pods``; each ToR is cabled to every Agg of
        its pod, each Agg to every Core.
    hosts_per_tor_pair
        Hosts under each ToR pair (the default 16 gives 384 GPUs; 86 gives 2,064, the trace's size).
    host_template
        Template name or object; default ``rail_8gpu`` (one 200 Gb/s NIC per GPU).
    links_per_host
        Host-to-ToR cables (even). Numbering the cables NIC by NIC, cable ``k`` goes to ToR ``k % 2`` of the
        pair: with 8 NICs and 8 links NIC ``i`` goes to ToR ``i % 2``; with 4 NICs each NIC has one cable
        to each ToR (dual-port NICs).
    uplinks_per_tor
        ToR-to-Agg cables per ToR, spread over the pod's Aggs; default one per Agg of the pod.
    host_link_bps, tor_agg_bps, agg_core_bps
        Cable speeds in bits/s. The paper gives none. Host links default to the template's NIC rate;
        the fabric defaults to non-blocking (1:1): a ToR-Agg cable carries the ToR's host-facing capacity
        divided by its uplinks, an Agg-Core cable the Agg's ToR-facing capacity divided by the cores
        (fabric cables then stand for bundles).
    latency_s
        Latency of every network link, seconds.

    Returns
    -------
    Topology
        Equal-cost paths between NICs on different pods: ``p_up * A * cores * A * p_up`` where ``A`` is the
        number of Aggs per pod (one Core per choice of source Agg, Core and destination Agg); within a pod
        across ToRs: ``A * p_up**2``.

    Examples
    --------
    >>> topo = three_layer_double_sided()
    >>> len(topo.nodes_of_kind(NodeKind.CORE)), topo.host("h0").tors
    (32, ('tor0', 'tor1'))
    >>> len(topo.equal_cost_paths("h0/nic0", "h16/nic0"))
    512

    References
    ----------
    Crux (SIGCOMM'24) §6.4; reference/crux-spec.md §6.4 and §9.
    """
    tmpl = resolve_template(host_template)
    n_tor, n_agg, n_core = (
        checks.count("tors", tors, minimum=2),
        checks.count("aggs", aggs),
        checks.count("cores", cores),
    )
    n_pod, hpp = checks.count("pods", pods), checks.count("hosts_per_tor_pair", hosts_per_tor_pair)
    pairs = checks.multiple("tors", n_tor, 2, "2 (ToR pairs)")
    pairs_per_pod = checks.multiple("tors", pairs, n_pod, f"2 x pods={n_pod}")
    aggs_per_pod = checks.multiple("aggs", n_agg, n_pod, f"pods={n_pod}")
    links, per_nic = _cables_per_nic(links_per_host, tmpl)
    checks.multiple("links_per_host", links, 2, "2 (dual-homed hosts)")
    ups = checks.count("uplinks_per_tor", aggs_per_pod if uplinks_per_tor is None else uplinks_per_tor)
    parallel = checks.multiple("uplinks_per_tor", ups, aggs_per_pod, f"the {aggs_per_pod} Aggs per pod")
    lat = checks.seconds("latency_s", latency_s)
    down = CableSpec(capacity_bps=checks.rate("host_link_bps", host_link_bps or tmpl.nic_bps), latency_s=lat)
    asm = Assembler(f"three_layer_double_sided_{n_tor}x{n_agg}x{n_core}")
    tor_ids = asm.switches("tor", n_tor, NodeKind.TOR)
    agg_ids = asm.switches("agg", n_agg, NodeKind.AGG)
    core_ids = asm.switches("core", n_core, NodeKind.CORE)
    for h in range(pairs * hpp):
        q = h // hpp
        uplinks = [
            [tor_ids[2 * q + (i * per_nic + c) % 2] for c in range(per_nic)] for i in range(tmpl.n_nics)
        ]
        asm.host(tmpl, h, uplinks, down)
    tor_down_bps = hpp * links // 2 * down.capacity_bps  # host-facing capacity of one ToR
    t2a = checks.rate("tor_agg_bps", tor_down_bps / ups if tor_agg_bps is None else tor_agg_bps)
    a2c = checks.rate(
        "agg_core_bps", 2 * pairs_per_pod * parallel * t2a / n_core if agg_core_bps is None else agg_core_bps
    )
    for pod in range(n_pod):
        pod_tors = tor_ids[2 * pod * pairs_per_pod : 2 * (pod + 1) * pairs_per_pod]
        pod_aggs = agg_ids[pod * aggs_per_pod : (pod + 1) * aggs_per_pod]
        asm.mesh(pod_tors, pod_aggs, parallel, CableSpec(capacity_bps=t2a, latency_s=lat))
    asm.mesh(agg_ids, core_ids, 1, CableSpec(capacity_bps=a2c, latency_s=lat))
    return asm.finish(
        {
            "kind": "three_layer_double_sided",
            "tors": n_tor,
            "aggs": n_agg,
            "cores": n_core,
            "pods": n_pod,
            "hosts_per_tor_pair": hpp,
            "host_template": tmpl.name,
            "links_per_host": links,
            "uplinks_per_tor": ups,
            "host_link_bps": down.capacity_bps,
            "tor_agg_bps": t2a,
            "agg_core_bps": a2c,
            "latency_s": lat,
        }
    )
