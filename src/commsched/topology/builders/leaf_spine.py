"""The vClos leaf-spine fabric, optionally with a layer of optical circuit switches between leaf and spine.

OCS model
---------
An optical circuit switch forwards light from one port to one other port; it does no packet switching.
We model it by its *circuits*: every leaf uplink ``j`` of leaf ``l`` ends on its own cross-connect node
``ocs0/c{l * up + j}`` (kind ``OCS``), which is cabled to exactly one spine (links leaf-OCS and
OCS-spine, both of kind ``FABRIC`` and with the uplink speed; the OCS adds no latency of its own beyond
the per-link latency). ``circuits[l][j]`` names that spine. The default circuits are static and connect
uplink ``j`` to spine ``j // p`` (``p`` parallel uplinks per spine), which is exactly the connectivity
of the fabric without OCS, so equal-cost path counts (and ECMP) are the same. OCS-vClos rewiring is a
new topology built with other ``circuits`` (idle links only; the 50 ms switching time is the
scheduler's business).

References
----------
vClos / OCS-vClos (``papers/vclos-paper.txt``) §3 (leaf-spine, one NIC per GPU, half of the leaf ports
down and half up, uniform bipartite leaf-spine graph), §7 and Fig. 4b (OCS layer between leaf and spine).
"""

from __future__ import annotations

from collections.abc import Sequence

from commsched.errors import InputError
from commsched.topology import checks
from commsched.topology.assembly import Assembler, CableSpec
from commsched.topology.builders.clos import DEFAULT_LATENCY_S
from commsched.topology.graph import Topology
from commsched.topology.hosts import NIC_100G_BPS, HostTemplate, rail_host, resolve_template
from commsched.topology.records import LinkKind, NodeId, NodeKind


def _check_circuits(circuits: object, leaves: int, up: int, spines: int) -> list[list[int]]:
    where = "topology.circuits"
    expected = f"{leaves} lists (one per leaf) of {up} spine indices in 0..{spines - 1}"
    if not isinstance(circuits, Sequence) or len(circuits) != leaves:
        raise InputError("wrong shape", where=where, expected=expected)
    out: list[list[int]] = []
    for row in circuits:
        if not isinstance(row, Sequence) or len(row) != up:
            raise InputError("wrong shape", where=where, expected=expected)
        if not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < spines for s in row):
            raise InputError(f"bad spine index in {list(row)!r}", where=where, expected=expected)
        out.append(list(row))
    per_spine = [sum(row.count(s) for row in out) for s in range(spines)]
    ports = leaves * up // spines
    if max(per_spine) > ports:
        raise InputError(
            f"a spine gets {max(per_spine)} circuits", where=where, expected=f"at most {ports} per spine"
        )
    return out


def _ocs_layer(
    asm: Assembler,
    leaf_ids: list[NodeId],
    spine_ids: list[NodeId],
    circuits: list[list[int]],
    spec: CableSpec,
) -> None:
    for li, leaf in enumerate(leaf_ids):
        for j, s in enumerate(circuits[li]):
            cross = asm.node(f"ocs0/c{li * len(circuits[li]) + j}", NodeKind.OCS)
            asm.cable(leaf, cross, spec, LinkKind.FABRIC)
            asm.cable(cross, spine_ids[s], spec, LinkKind.FABRIC)


def _template(host_template: str | HostTemplate | None, gpus: int, nic_bps: float) -> HostTemplate:
    if host_template is None:
        return rail_host(gpus, nic_bps=nic_bps)
    tmpl = resolve_template(host_template)
    if tmpl.n_gpus != gpus:
        raise InputError(
            f"template {tmpl.name} has {tmpl.n_gpus} GPUs",
            where="topology.host_template",
            expected=f"gpus_per_host={gpus}",
        )
    return tmpl


def leaf_spine(
    *,
    leaves: int = 4,
    spines: int = 8,
    gpus_per_host: int = 8,
    hosts_per_leaf: int | None = None,
    ports_per_leaf: int | None = None,
    host_template: str | HostTemplate | None = None,
    host_link_bps: float = NIC_100G_BPS,
    uplink_bps: float | None = None,
    latency_s: float = DEFAULT_LATENCY_S,
    ocs: bool = False,
    circuits: Sequence[Sequence[int]] | None = None,
) -> Topology:
    """The vClos leaf-spine fabric (leaves ``leaf{i}`` of kind TOR, spines ``spine{j}`` of kind AGG).

    Parameters
    ----------
    leaves, spines
        Switch counts.
    gpus_per_host
        GPUs per host; each GPU has its own NIC (``rail_host(gpus_per_host)``), cabled to the host's leaf.
    hosts_per_leaf
        Default ``max(1, spines // gpus_per_host)``: as many GPUs per leaf as spines, the vClos
        ``L x S`` GPU cluster.
    ports_per_leaf
        Leaf radix; half of it faces hosts, half faces spines. Default ``2 x`` the host-facing ports. The
        ``ports_per_leaf / 2`` uplinks are spread evenly over the spines (a multiple of ``spines``).
    host_template
        Optional template (name or object) with ``gpus_per_host`` GPUs, instead of the rail host.
    host_link_bps, uplink_bps
        Cable speeds in bits/s; default 100 Gb/s (the vClos testbed's NICs) for both.
    latency_s
        Latency of every network link, seconds.
    ocs, circuits
        Insert the OCS layer (see the module docstring); ``circuits[l][j]`` is the spine of uplink ``j``
        of leaf ``l`` (only with ``ocs=True``; default static = same as no OCS).

    Returns
    -------
    Topology
        NICs under different leaves have ``spines * p**2`` equal-cost paths (``p`` parallel uplinks per
        leaf-spine pair, default 1, so ``#spines``).

    Examples
    --------
    >>> topo = leaf_spine(leaves=4, spines=8)
    >>> topo.n_gpus, len(topo.equal_cost_paths("h0/nic0", "h1/nic0"))
    (32, 8)
    >>> len(leaf_spine(leaves=4, spines=8, ocs=True).equal_cost_paths("h0/nic0", "h1/nic0"))
    8

    References
    ----------
    vClos §3, §5.2 (source routing over the spine chosen per port), §7 (OCS-vClos).
    """
    n_leaf, n_spine = checks.count("leaves", leaves), checks.count("spines", spines)
    gpus = checks.count("gpus_per_host", gpus_per_host)
    hpl = checks.count(
        "hosts_per_leaf", max(1, n_spine // gpus) if hosts_per_leaf is None else hosts_per_leaf
    )
    down_bps = checks.rate("host_link_bps", host_link_bps)
    tmpl = _template(host_template, gpus, down_bps)
    n_down = hpl * tmpl.n_nics
    ports = checks.count("ports_per_leaf", 2 * n_down if ports_per_leaf is None else ports_per_leaf)
    if ports // 2 < n_down:
        raise InputError(
            f"{n_down} host-facing ports needed on a leaf with {ports} ports",
            where="topology.ports_per_leaf",
            expected=f"at least {2 * n_down}",
        )
    up = ports // 2
    parallel = checks.multiple("ports_per_leaf", up, n_spine, f"2 x spines={n_spine}")
    lat = checks.seconds("latency_s", latency_s)
    down = CableSpec(capacity_bps=down_bps, latency_s=lat)
    upspec = CableSpec(capacity_bps=checks.rate("uplink_bps", uplink_bps or down_bps), latency_s=lat)
    if circuits is not None and not ocs:
        raise InputError(
            "circuits given without an OCS layer", where="topology.circuits", expected="ocs: true"
        )
    asm = Assembler(f"leaf_spine_{n_leaf}x{n_spine}" + ("_ocs" if ocs else ""))
    leaf_ids = asm.switches("leaf", n_leaf, NodeKind.TOR)
    spine_ids = asm.switches("spine", n_spine, NodeKind.AGG)
    for h in range(n_leaf * hpl):
        asm.host(tmpl, h, [[leaf_ids[h // hpl]]] * tmpl.n_nics, down)
    wiring: list[list[int]] | None = None
    if ocs:
        default = [[j // parallel for j in range(up)] for _ in range(n_leaf)]
        wiring = _check_circuits(default if circuits is None else circuits, n_leaf, up, n_spine)
        _ocs_layer(asm, leaf_ids, spine_ids, wiring, upspec)
    else:
        asm.mesh(leaf_ids, spine_ids, parallel, upspec)
    return asm.finish(
        {
            "kind": "leaf_spine",
            "leaves": n_leaf,
            "spines": n_spine,
            "gpus_per_host": gpus,
            "hosts_per_leaf": hpl,
            "ports_per_leaf": ports,
            "host_template": tmpl.name,
            "host_link_bps": down_bps,
            "uplink_bps": upspec.capacity_bps,
            "latency_s": lat,
            "ocs": bool(ocs),
            "circuits": None if wiring is None else [list(r) for r in wiring],
        }
    )
