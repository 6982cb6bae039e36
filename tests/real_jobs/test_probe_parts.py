"""The probing oracle's parts without a network: packets, answers, ICMP buckets, and the path logic
against a simulated fabric (its own hash per router, Linux's per-peer ICMP limit, a silent router)."""

from __future__ import annotations

import hashlib
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from commsched.runtime.enforce.pinning.oracle import PortSearch
from commsched.runtime.enforce.pinning.pathprobe import FabricMap, PathProbing, ProbeSettings
from commsched.runtime.enforce.pinning.probe import (
    IcmpBudget,
    Probe,
    checksum,
    parse_time_exceeded,
    probe_packet,
)
from commsched.runtime.enforce.pinning.probeoracle import ProbeOracle
from commsched.topology import crux_testbed


def _fold(data: bytes) -> int:
    """One's-complement sum of 16-bit words (a header with a right checksum sums to 0xFFFF)."""
    total = 0
    for i in range(0, len(data), 2):
        total += (data[i] << 8) + (data[i + 1] if i + 1 < len(data) else 0)
        total = (total & 0xFFFF) + (total >> 16)
    return total


def test_probe_packet_fields_and_checksums() -> None:
    p = Probe(src="10.0.0.1", dst="10.0.5.3", sport=20017, dport=41000, ttl=2)
    pkt = probe_packet(p, seq=123456789, ident=7)
    assert len(pkt) == 40
    ver_ihl, _, total, ident, _, ttl, proto = struct.unpack("!BBHHHBB", pkt[:10])
    assert (ver_ihl, total, ident, ttl, proto) == (0x45, 40, 7, 2, socket.IPPROTO_TCP)
    assert socket.inet_ntoa(pkt[12:16]) == "10.0.0.1" and socket.inet_ntoa(pkt[16:20]) == "10.0.5.3"
    assert _fold(pkt[:20]) == 0xFFFF
    sport, dport, seq, _, off, flags = struct.unpack("!HHIIBB", pkt[20:34])
    assert (sport, dport, seq, off >> 4, flags) == (20017, 41000, 123456789, 5, 0x04)  # RST only
    pseudo = pkt[12:20] + struct.pack("!BBH", 0, 6, 20)
    assert _fold(pseudo + pkt[20:]) == 0xFFFF
    assert checksum(b"\x01") == (~0x0100) & 0xFFFF


def _icmp(router: str, inner: bytes, icmp_type: int = 11) -> bytes:
    body = struct.pack("!BBHI", icmp_type, 0, 0, 0) + inner[:28]
    outer = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), 0, 0, 64, 1, 0,
                        socket.inet_aton(router), socket.inet_aton("10.0.0.1"))  # fmt: skip
    return outer + body


def test_time_exceeded_names_router_and_probe() -> None:
    p = Probe(src="10.0.0.1", dst="10.0.5.3", sport=20017, dport=41000, ttl=2)
    te = parse_time_exceeded(_icmp("100.64.0.9", probe_packet(p, seq=99)))
    assert te is not None
    assert (te.router, te.src, te.dst, te.sport, te.dport, te.seq) == (
        "100.64.0.9", "10.0.0.1", "10.0.5.3", 20017, 41000, 99
    )  # fmt: skip
    assert parse_time_exceeded(_icmp("100.64.0.9", probe_packet(p, seq=99), icmp_type=3)) is None
    udp = bytearray(probe_packet(p, seq=1))
    udp[9] = socket.IPPROTO_UDP
    assert parse_time_exceeded(_icmp("100.64.0.9", bytes(udp))) is None
    assert parse_time_exceeded(b"\x45" + bytes(10)) is None


def test_budget_is_a_burst_of_six_then_one_a_second() -> None:
    b = IcmpBudget()
    sent = 0
    for i in range(40):  # one request every 100 ms for 4 s: 6 at once, then one a second
        t = i * 0.1
        if b.available("agg0", "10.0.0.1", now=t) >= 1:
            b.spend("agg0", "10.0.0.1", now=t)
            sent += 1
    assert sent == 6 + 3  # closed form: burst, then floor(3.9 s / 1 s) refills after the burst's 0 s
    assert b.available("agg0", "10.0.0.2", now=0.0) == 6  # per peer


# --------------------------------------------------------------------------- a simulated fabric


@dataclass
class FakeFabric:
    """crux_testbed with a keyed hash per ToR, Linux's per-peer ICMP bucket, optionally a silent router."""

    fabric: FabricMap
    silent: frozenset[str] = frozenset()
    now: float = 0.0
    tokens: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    sent: int = 0

    def path(self, src: str, dst: str, sport: int, dport: int) -> tuple[int, ...]:
        routes = self.fabric.routes(src, dst)
        key = f"{src}|{dst}|{sport}|{dport}".encode()
        cands = list(routes)
        for k in range(len(cands[0].hops)):
            options = sorted({c.hops[k] for c in cands})
            h = int.from_bytes(hashlib.sha256(options[0].encode() + key).digest()[:4], "big")
            pick = options[h % len(options)]
            cands = [c for c in cands if c.hops[k] == pick]
        return cands[0].links

    def _allow(self, router: str, peer: str) -> bool:
        level, last = self.tokens.get((router, peer), (6.0, self.now))
        level = min(6.0, level + self.now - last)
        ok = level >= 1.0
        self.tokens[(router, peer)] = (level - 1.0 if ok else level, self.now)
        return ok

    def send_round(self, probes: Sequence[Probe]) -> list[str | None]:
        out: list[str | None] = []
        for p in probes:
            self.sent += 1
            routes = {r.links: r for r in self.fabric.routes(p.src, p.dst)}
            hop = routes[self.path(p.src, p.dst, p.sport, p.dport)].hops[p.ttl - 1]
            ok = hop not in self.silent and self._allow(hop, p.src)
            out.append(f"addr-{hop}" if ok else None)
        self.now += 0.25 if None in out else 0.001  # a round with a miss waits for its timeout
        return out

    def sleep(self, s: float) -> None:
        self.now += s


def _setup(silent: frozenset[str] = frozenset()) -> tuple[FakeFabric, PathProbing]:
    topo = crux_testbed()
    nics = {f"10.0.{i // 4}.{i % 4 + 1}": n for i, n in enumerate(nic for h in topo.hosts for nic in h.nics)}
    routers = {f"addr-{n.id}": n.id for n in topo.nodes if n.kind.value in ("tor", "agg")}
    fake = FakeFabric(fabric=FabricMap(topology=topo, routers=routers, nics=nics), silent=silent)
    probing = PathProbing(fake.fabric, fake.send_round, clock=lambda: fake.now, sleep=fake.sleep)
    return fake, probing


def test_trace_agrees_with_the_fabric_on_200_tuples() -> None:
    fake, probing = _setup()
    ips = sorted(fake.fabric.nics)
    flows = []
    for i in range(200):
        src = ips[(7 * i) % len(ips)]
        dst = ips[(11 * i + 5) % len(ips)]
        if src.split(".")[2] == dst.split(".")[2]:
            dst = ips[(11 * i + 9) % len(ips)]
        flows.append((src, dst, 20000 + 13 * i, 1024 + 97 * i))
    got = probing.trace(flows)
    assert [t.links for t in got] == [fake.path(*f) for f in flows]
    assert fake.sent <= len(flows)  # one probe per tuple at most (hop 2 only; same-ToR pairs none)


def test_find_keeps_only_ports_on_the_target() -> None:
    fake, probing = _setup()
    src, dst = "10.0.0.1", "10.0.11.1"
    for r in fake.fabric.routes(src, dst):
        got = probing.find((src, dst, 5201), r.links, want=8, exclude=frozenset({20000}))
        assert got.ports and 20000 not in got.ports
        assert all(fake.path(src, dst, p, 5201) == r.links for p in got.ports)
        assert got.elapsed_s <= ProbeSettings().max_s + 0.5


def test_silent_router_is_inferred_or_reported() -> None:
    fake, probing = _setup(silent=frozenset({"agg3"}))
    oracle = ProbeOracle(fake.fabric, send_round=fake.send_round)
    oracle.probing = probing
    src, dst = "10.0.0.1", "10.0.11.1"
    via = next(r for r in fake.fabric.routes(src, dst) if "agg3" in r.hops)
    got = oracle.find(PortSearch(src=src, dst=dst, dport=5201, forward=via.links, reverse=None))
    assert all(fake.path(src, dst, p, 5201) == via.links for p in got.ports)
    assert got.ports or "budget" in got.reason
    assert "agg3" in probing.silent_routers()
    flows = [(src, dst, p, 7000) for p in range(30000, 30040)]
    for f, t in zip(flows, probing.trace(flows), strict=True):
        assert t.links in ((), fake.path(*f)), t.reason
        assert t.links or "did not answer" in t.reason


def test_reverse_is_said_to_be_out_of_sight() -> None:
    fake, _ = _setup()
    oracle = ProbeOracle(fake.fabric, send_round=fake.send_round)
    src, dst = "10.0.0.1", "10.0.11.1"
    fwd = fake.fabric.routes(src, dst)[0].links
    rev = fake.fabric.routes(dst, src)[0].links
    got = oracle.find(PortSearch(src=src, dst=dst, dport=5201, forward=fwd, reverse=rev))
    assert got.pinned and "reverse" in got.reason
    none = oracle.find(PortSearch(src=src, dst=dst, dport=5201, forward=None, reverse=rev))
    assert not none.pinned and not none.ports


@pytest.mark.parametrize("n", [1, 2])
def test_probe_count_within_budget(n: int) -> None:
    fake, probing = _setup()
    src, dst = "10.0.0.1", "10.0.11.1"
    target = fake.fabric.routes(src, dst)[n].links
    got = probing.find((src, dst, 5201), target, want=8, exclude=frozenset())
    # stated budget: at most ProbeSettings.round_max new ports a round, rounds no longer than max_s
    assert got.probes <= 16 * 8 + 64


def test_cli_oracle_option() -> None:
    from typer.testing import CliRunner

    from commsched.cli.app import app

    runner = CliRunner()
    for argv in (["agent", "--help"], ["testbed", "run", "--help"]):
        res = runner.invoke(app, argv, env={"COLUMNS": "200"})
        assert res.exit_code == 0 and "--oracle" in res.output
    import subprocess
    import sys

    argv = [
        str(Path(sys.executable).with_name("commsched")),
        "agent",
        "--daemon",
        "http://127.0.0.1:9",
        "--host",
        "h0",
    ]
    res2 = subprocess.run(
        [*argv, "--oracle", "probe"], capture_output=True, text=True, timeout=60, check=False
    )
    assert res2.returncode == 2 and "--oracle" in res2.stderr and "Traceback" not in res2.stderr
    res = runner.invoke(app, ["testbed", "run", "crux_example1", "--oracle", "ttl"])
    assert res.exit_code == 2 and "--oracle" in res.output
    res = runner.invoke(app, ["testbed", "run", "crux_example1", "--segment-bytes", "100"])
    assert res.exit_code == 2 and "--segment-bytes" in res.output and "1500 to 65536" in res.output


def test_searches_are_counted_in_the_agents_metrics() -> None:
    from prometheus_client import CollectorRegistry

    from commsched.runtime.agent.metrics import ProbeMetrics

    registry = CollectorRegistry()
    fake, probing = _setup()
    oracle = ProbeOracle(fake.fabric, send_round=fake.send_round, recorder=ProbeMetrics(registry))
    oracle.probing = probing
    src, dst = "10.0.0.1", "10.0.11.1"
    for k, route in enumerate(fake.fabric.routes(src, dst)[:2]):
        oracle.find(PortSearch(src=src, dst=dst, dport=5201 + k, forward=route.links, reverse=None))
    assert probing.sent > 0
    # every probe the searches sent is counted, and each search's time observed once
    assert registry.get_sample_value("commsched_agent_probes_sent_total") == probing.sent
    assert registry.get_sample_value("commsched_agent_probe_search_seconds_count") == 2
