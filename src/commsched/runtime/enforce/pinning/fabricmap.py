"""The fabric map file of the probing oracle: the topology and the addresses routers answer from.

A probe's answer names a router by one of its addresses; the map turns it into the topology's node.
On a testbed the map comes from its layout (:meth:`~.pathprobe.FabricMap.from_testbed`); on a real
fabric it is the operator's inventory, given to ``commsched agent --enforce --fabric FILE``::

    {"format": 1,
     "topology": {"kind": "crux_testbed"},                  # a topology section, as in a scenario
     "routers": {"tor0": ["100.64.0.1", "100.64.0.3"], ...},  # every address each router answers from
     "nics": {"h0/nic0": "10.0.0.1", ...}}                    # optional: else the topology's own

:func:`fabric_to_json` writes one (``FabricMap.from_testbed(NAME)`` gives a testbed's).
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict

from commsched.errors import InputError
from commsched.runtime.enforce.pinning.pathprobe import FabricMap
from commsched.runtime.protocol.fields import Fields
from commsched.topology import NodeId

__all__ = ["FabricJSON", "fabric_from_json", "fabric_to_json", "load_fabric"]


class FabricJSON(TypedDict):
    """A fabric map file (:func:`fabric_to_json`)."""

    format: int
    #: the topology section it was built from (``kind`` and the builder's parameters: arbitrary JSON)
    topology: dict[str, Any]
    routers: dict[str, list[str]]  # router -> the addresses it answers from
    nics: dict[str, str]  # NIC -> its address


def fabric_to_json(fabric: FabricMap) -> FabricJSON:
    """The map as the file holds it."""
    routers: dict[str, list[str]] = {}
    for ip, node in sorted(fabric.routers.items()):
        routers.setdefault(str(node), []).append(ip)
    return {
        "format": 1,
        "topology": dict(fabric.topology.params),
        "routers": routers,
        "nics": {str(n): ip for ip, n in sorted(fabric.nics.items(), key=lambda x: x[1])},
    }


def _address(value: object, where: str) -> str:
    try:
        return str(ipaddress.IPv4Address(str(value)))
    except ValueError:
        raise InputError(f"not an IPv4 address: {value!r}", where=where, expected="a.b.c.d") from None


def fabric_from_json(data: object, where: str = "fabric") -> FabricMap:
    """Read a map (see the module docstring); every router and NIC must be in the topology."""
    from commsched.topology.builders import build_topology

    f = Fields(data, where=where)
    f.version("format", 1)
    spec = f.mapping("topology")
    kind = spec.get("kind")
    if not isinstance(kind, str):
        raise InputError(
            "missing or not a string", where=f"{where}.topology.kind", expected="a topology kind"
        )
    topo = build_topology(kind, {k: v for k, v in spec.items() if k != "kind"}, where=f"{where}.topology")
    ids = {str(n.id) for n in topo.nodes}
    routers: dict[str, NodeId] = {}
    for node, addrs in f.mapping("routers").items():
        if node not in ids or not isinstance(addrs, list):
            raise InputError(
                f"{node!r}: not a topology node with a list",
                where=f"{where}.routers",
                expected="node: [addresses]",
            )
        routers.update({_address(a, f"{where}.routers.{node}"): NodeId(node) for a in addrs})
    own = {NodeId(nic): topo.node(nic).ip for h in topo.hosts for nic in h.nics}
    by_nic = {n: str(ipaddress.IPv4Address(ip)) for n, ip in own.items() if ip is not None}
    for nic, ip in f.mapping("nics", required=False).items():
        if NodeId(nic) not in own:
            raise InputError(f"no NIC {nic!r} in the topology", where=f"{where}.nics")
        by_nic[NodeId(nic)] = _address(ip, f"{where}.nics.{nic}")
    return FabricMap(topology=topo, routers=routers, nics={ip: n for n, ip in by_nic.items()})


def load_fabric(path: Path) -> FabricMap:
    """Read the map file at ``path`` (one-line errors naming the file)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", where=str(path), expected="a fabric map") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg} (line {exc.lineno})", where=str(path)) from None
    return fabric_from_json(data, where=str(path))
