"""The probing oracle's fabric map file: written and read back, and one-line errors on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commsched.errors import InputError
from commsched.runtime.enforce.pinning.fabricmap import fabric_from_json, fabric_to_json, load_fabric
from commsched.runtime.enforce.pinning.pathprobe import FabricMap
from commsched.topology import NodeId, crux_testbed


def _map() -> FabricMap:
    topo = crux_testbed()
    routers = {f"100.64.{i}.{j}": n.id for i, n in enumerate(topo.nodes) if n.kind.value in ("tor", "agg")
               for j in (1, 2)}  # fmt: skip
    nics = {
        f"10.9.{i // 4}.{i % 4 + 1}": NodeId(n) for i, n in enumerate(x for h in topo.hosts for x in h.nics)
    }
    return FabricMap(topology=topo, routers=routers, nics=nics)


def test_round_trip(tmp_path: Path) -> None:
    fab = _map()
    path = tmp_path / "fabric.json"
    path.write_text(json.dumps(fabric_to_json(fab)))
    back = load_fabric(path)
    assert dict(back.routers) == dict(fab.routers)
    assert dict(back.nics) == dict(fab.nics)
    assert back.routes("10.9.0.1", "10.9.11.1") == fab.routes("10.9.0.1", "10.9.11.1")
    assert len(back.routes("10.9.0.1", "10.9.11.1")) == 8


def test_nics_default_to_the_topology() -> None:
    data = fabric_to_json(_map())
    del data["nics"]
    back = fabric_from_json(data)
    topo = crux_testbed()
    assert len(back.nics) == sum(len(h.nics) for h in topo.hosts)


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (lambda d: d["routers"].update({"agg99": ["1.2.3.4"]}), "routers"),
        (lambda d: d["routers"].update({"agg0": ["1.2.3"]}), "routers.agg0"),
        (lambda d: d["nics"].update({"h99/nic0": "1.2.3.4"}), "nics"),
        (lambda d: d.update({"format": 2}), "format"),
        (lambda d: d["topology"].update({"kind": "nope"}), "topology"),
    ],
)
def test_bad_maps_say_where(edit, where: str) -> None:  # type: ignore[no-untyped-def]
    data = fabric_to_json(_map())
    edit(data)
    with pytest.raises(InputError) as exc:
        fabric_from_json(data, where="f.json")
    assert str(exc.value).startswith(f"f.json.{where}")


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_fabric(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(InputError, match="not JSON"):
        load_fabric(tmp_path / "bad.json")
