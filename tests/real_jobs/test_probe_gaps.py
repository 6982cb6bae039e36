"""Two checks of the probing oracle that a plausible slip would pass unnoticed otherwise (no root: the
fabric is :class:`tests.real_jobs.test_probe_parts.FakeFabric`, whose own hash is the reference):

* a search that gives up (no router answers, so no port can be known) is reported unpinned with its
  reason, never as pinned;
* a second search for the same key that excludes the ports the first found (they are taken) returns
  none of them, although the first search's answers are cached, and only ports whose path, by the
  fabric's own hash, is the decided one.
"""

from __future__ import annotations

from commsched.runtime.enforce.pinning.oracle import PortSearch
from commsched.runtime.enforce.pinning.probeoracle import ProbeOracle
from tests.real_jobs.test_probe_parts import _setup


def test_a_search_that_gives_up_is_not_pinned() -> None:
    fake, _ = _setup()
    routers = frozenset(fake.fabric.routers.values())
    fake, probing = _setup(silent=routers)  # no router answers anything
    oracle = ProbeOracle(fake.fabric, send_round=fake.send_round)
    oracle.probing = probing
    src, dst = "10.0.0.1", "10.0.11.1"
    via = fake.fabric.routes(src, dst)[1]
    got = oracle.find(PortSearch(src=src, dst=dst, dport=5201, forward=via.links, reverse=None))
    assert fake.sent > 0  # it probed, and nothing came back
    assert got.ports == ()
    assert got.pinned is False
    assert "no port within the probe budget" in got.reason


def test_a_second_search_excludes_the_ports_the_first_found() -> None:
    fake, probing = _setup()
    src, dst, dport = "10.0.0.1", "10.0.11.1", 5201
    target = fake.fabric.routes(src, dst)[2].links
    first = probing.find((src, dst, dport), target, want=4, exclude=frozenset())
    assert len(first.ports) == 4
    taken = frozenset(first.ports)
    second = probing.find((src, dst, dport), target, want=4, exclude=taken)
    assert second.ports and not taken & set(second.ports), (first.ports, second.ports)
    assert all(fake.path(src, dst, p, dport) == target for p in second.ports)
