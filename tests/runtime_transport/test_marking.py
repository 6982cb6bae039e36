"""Source port and DSCP are really applied: read back with getsockopt, and seen on the wire."""

from __future__ import annotations

import os
import select
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from commsched.runtime import Communicator, Marking, Options, init
from commsched.runtime.transport.policy import get_dscp

from .helpers import run_ranks


def free_ports(k: int) -> list[int]:
    """``k`` distinct ports that are free now (bound to port 0, then released)."""
    socks = [socket.socket() for _ in range(k)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class TablePolicy:
    """A mutable policy (as the host agent's answers change between decision versions)."""

    dscp: int
    ports: dict[tuple[int, int], int] = field(default_factory=dict)

    def marking(self, job: str, src: int, dst: int) -> Marking:
        return Marking(source_port=self.ports.get((src, dst)), dscp=self.dscp)


def test_source_port_and_dscp_on_both_ends() -> None:
    n = 3
    ports = free_ports(n)
    policy = TablePolicy(dscp=46, ports={(r, (r + 1) % n): ports[r] for r in range(n)})

    def body(c: Communicator) -> tuple[list, int]:
        c.all_reduce(np.ones(1000))
        return c.connections(), get_dscp(c.group._listener)

    results = run_ranks(n, body, policy=policy)
    for r, (conns, listen_dscp) in enumerate(results):
        assert listen_dscp == 46
        out = [x for x in conns if x.direction == "out"]
        inc = [x for x in conns if x.direction == "in"]
        assert [(x.peer, x.local[1], x.dscp) for x in out] == [((r + 1) % n, ports[r], 46)]
        # the receiving end sees the sender's pinned source port and marks its own segments too
        assert [(x.peer, x.remote[1], x.dscp) for x in inc] == [((r - 1) % n, ports[(r - 1) % n], 46)]


def test_remark_live_connections_and_rebind_source_port() -> None:
    n = 2
    first, second = free_ports(2), free_ports(2)
    policy = TablePolicy(dscp=46, ports={(0, 1): first[0], (1, 0): first[1]})
    seen: dict[int, list] = {}

    def body(c: Communicator) -> np.ndarray:
        x = c.all_reduce(np.full(100, 1.0 + c.rank))
        before = c.connections()
        c.all_reduce(np.zeros(1))  # both ranks are past the first check before the policy changes
        if c.rank == 0:
            policy.dscp = 10
        c.all_reduce(np.zeros(1))
        c.refresh_policy()
        c.all_reduce(x)
        mid = c.connections()
        c.all_reduce(np.zeros(1))
        if c.rank == 0:
            policy.ports = {(0, 1): second[0], (1, 0): second[1]}
        c.all_reduce(np.zeros(1))
        c.refresh_policy()
        c.all_reduce(x)
        seen[c.rank] = [before, mid, c.connections()]
        return x

    for x in run_ranks(n, body, policy=policy):
        np.testing.assert_array_equal(x, np.full(100, 12.0))  # (1+2) -> 6 -> 12: still correct
    for r in range(n):
        before, mid, after = seen[r]
        assert {(x.direction, x.dscp) for x in before} == {("out", 46), ("in", 46)}
        assert {(x.direction, x.dscp) for x in mid} == {("out", 10), ("in", 10)}
        assert [x.local for x in mid if x.direction == "out"] == [
            x.local for x in before if x.direction == "out"
        ]
        assert [x.local[1] for x in after if x.direction == "out"] == [second[r]]
        assert [x.remote[1] for x in after if x.direction == "in"] == [second[1 - r]]
        assert {x.dscp for x in after} == {10}


def _pcap_packets(path: Path) -> list[tuple[int, int, int, int]]:
    """(dscp, sport, dport, tcp flags) of every IPv4/TCP packet of a pcap file (Ethernet or cooked)."""
    data = path.read_bytes()
    magic, _, _, _, _, _, linktype = struct.unpack("<IHHiIII", data[:24])
    assert magic == 0xA1B2C3D4, "little-endian microsecond pcap expected"
    link_len = {1: 14, 113: 16, 276: 20}[linktype]
    pos, rows = 24, []
    while pos + 16 <= len(data):
        _, _, caplen, _ = struct.unpack("<IIII", data[pos : pos + 16])
        pkt = data[pos + 16 : pos + 16 + caplen]
        pos += 16 + caplen
        ip = pkt[link_len:]
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        ihl = (ip[0] & 0xF) * 4
        sport, dport = struct.unpack("!HH", ip[ihl : ihl + 4])
        rows.append((ip[1] >> 2, sport, dport, ip[ihl + 13]))
    return rows


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed (apt package tcpdump)")
@pytest.mark.skipif(os.geteuid() != 0, reason="capturing on loopback needs root")
def test_capture_on_loopback_shows_port_and_dscp_both_ways() -> None:
    sport, dport = free_ports(2)
    # rank 1 listens on a known port so that the capture filter can name the connection.
    # Fixed peers: rank 0 listens on an ephemeral port it never uses (no data flows 1 -> 0).
    policy = TablePolicy(dscp=26, ports={(0, 1): sport})
    with tempfile.TemporaryDirectory(prefix="csx-cap-") as tmp:
        pcap = Path(tmp) / "lo.pcap"
        cmd = ["tcpdump", "-i", "lo", "-U", "-n", "-w", str(pcap), f"tcp port {sport} and tcp port {dport}"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            ready, _, _ = select.select([proc.stderr], [], [], 20)
            assert ready and "listening on lo" in proc.stderr.readline()  # capture has started
            (p0,) = free_ports(1)
            peers = [("127.0.0.1", p0), ("127.0.0.1", dport)]

            def rank(r: int) -> None:
                opts = Options(policy=policy, timeout_s=10)
                with init(job="csx-cap", rank=r, world_size=2, peers=peers, options=opts) as c:
                    if r == 0:
                        c.send(np.arange(200_000.0), 1)
                    else:
                        c.recv(np.empty(200_000), 0)

            threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            time.sleep(0.5)
        finally:
            proc.terminate()
            proc.wait(10)
            if proc.stderr is not None:
                proc.stderr.close()
        rows = _pcap_packets(pcap)
    forward = [r for r in rows if r[1] == sport and r[2] == dport]
    backward = [r for r in rows if r[1] == dport and r[2] == sport]
    syn_ack = [r for r in backward if r[3] & 0x12 == 0x12]
    assert len(forward) > 5 and len(backward) > 1, rows[:5]
    assert {r[0] for r in forward} == {26}
    assert {r[0] for r in backward} == {26}
    assert len(syn_ack) == 1  # marked by the listener before accept


def test_one_source_port_serves_several_peers() -> None:
    n = 3
    ports = free_ports(n)
    policy = TablePolicy(dscp=8, ports={(r, d): ports[r] for r in range(n) for d in range(n) if d != r})
    inputs = [np.arange(n * 4, dtype=np.int64).reshape(n, 4) + 100 * r for r in range(n)]

    def body(c: Communicator) -> tuple[np.ndarray, list]:
        return c.all_to_all(inputs[c.rank]), c.connections()

    for r, (out, conns) in enumerate(run_ranks(n, body, policy=policy)):
        np.testing.assert_array_equal(out, np.stack([inputs[i][r] for i in range(n)]))
        assert sorted((x.peer, x.local[1]) for x in conns if x.direction == "out") == [
            (d, ports[r]) for d in range(n) if d != r
        ]


def test_policy_refresh_interval_remarks_without_the_job_asking() -> None:
    policy = TablePolicy(dscp=46)
    seen: dict[int, tuple[set[int], set[int]]] = {}

    def body(c: Communicator) -> None:
        c.all_reduce(np.ones(10))
        before = {x.dscp for x in c.connections()}
        c.all_reduce(np.ones(10))
        if c.rank == 0:
            policy.dscp = 12
        c.all_reduce(np.ones(10))
        time.sleep(0.3)
        c.all_reduce(np.ones(10))  # due refresh happens at the start of this collective
        seen[c.rank] = (before, {x.dscp for x in c.connections()})

    run_ranks(2, body, policy=policy, policy_refresh_s=0.2)
    assert seen == {0: ({46}, {12}), 1: ({46}, {12})}


def test_profiling_window_runs_at_the_top_class_then_drops() -> None:
    from commsched.runtime import ProfilingWindowPolicy, StaticPolicy

    until = time.monotonic() + 2.5  # generous: rendezvous on a loaded machine takes time
    policy = ProfilingWindowPolicy(inner=StaticPolicy(dscp=10), top_dscp=46, until=until)

    def body(c: Communicator) -> tuple[set[int], set[int]]:
        c.all_reduce(np.ones(10))
        during = {x.dscp for x in c.connections()}
        time.sleep(max(until - time.monotonic(), 0) + 0.3)
        c.all_reduce(np.ones(10))
        return during, {x.dscp for x in c.connections()}

    assert run_ranks(2, body, policy=policy, policy_refresh_s=0.2) == [({46}, {10})] * 2


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback (::1)")
def test_ipv6_traffic_class_and_source_port() -> None:
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        sport = s.getsockname()[1]
    peers = [("::1", p) for p in free_ports_v6(2)]
    policy = TablePolicy(dscp=26, ports={(0, 1): sport})
    results: dict[int, list] = {}

    def rank(r: int) -> None:
        opts = Options(policy=policy, timeout_s=10)
        with init(job="csx-v6", rank=r, world_size=2, peers=peers, options=opts) as c:
            c.all_reduce(np.arange(100.0))
            results[r] = c.connections()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    out0 = [x for x in results[0] if x.direction == "out"]
    assert [(x.local, x.dscp) for x in out0] == [(("::1", sport), 26)]
    assert {x.dscp for r in (0, 1) for x in results[r]} == {26}


def free_ports_v6(k: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET6) for _ in range(k)]
    try:
        for s in socks:
            s.bind(("::1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def test_plain_function_policy_and_bad_policy() -> None:
    from commsched.errors import InputError
    from commsched.runtime.transport.policy import as_policy

    (sport,) = free_ports(1)

    def fn(job: str, src: int, dst: int) -> tuple[int | None, int]:
        assert job == "csx-test"
        return (sport if src == 0 else None), 34

    results = run_ranks(2, lambda c: (c.all_reduce(np.ones(3)), c.connections())[1], policy=as_policy(fn))
    assert [(x.local[1], x.dscp) for x in results[0] if x.direction == "out"] == [(sport, 34)]
    assert {x.dscp for conns in results for x in conns} == {34}
    with pytest.raises(InputError, match="connection policy of type int"):
        as_policy(7)  # type: ignore[arg-type]


@dataclass
class PairPolicy:
    """A different DSCP for every directed pair (the listener's class is only one of them)."""

    def marking(self, job: str, src: int, dst: int) -> Marking:
        return Marking(dscp=8 * src + dst + 1)


def test_each_accepted_socket_gets_its_own_connections_dscp() -> None:
    n = 3

    def body(c: Communicator) -> list:
        c.all_to_all(np.zeros((n, 5)))
        return c.connections()

    for r, conns in enumerate(run_ranks(n, body, policy=PairPolicy())):
        got = sorted((x.direction, x.peer, x.dscp) for x in conns)
        want = [("in", s, 8 * s + r + 1) for s in range(n) if s != r]
        want += [("out", d, 8 * r + d + 1) for d in range(n) if d != r]
        assert got == sorted(want)


def test_sender_binds_its_own_listening_address() -> None:
    """A rank sends from the address it listens on (its NIC on a multi-NIC host), not the kernel's pick."""
    n = 3
    ports = free_ports(2 * n)
    hosts = [f"127.0.0.{2 + r}" for r in range(n)]  # all of 127/8 is local on Linux
    peers = [(hosts[r], ports[r]) for r in range(n)]
    policy = TablePolicy(dscp=26, ports={(r, (r + 1) % n): ports[n + r] for r in range(n)})
    results: list[object] = [None] * n
    errors: list[BaseException] = []

    def body(r: int) -> None:
        try:
            with init(
                job="cs3-src",
                rank=r,
                world_size=n,
                peers=peers,
                options=Options(policy=policy, timeout_s=10.0),
            ) as c:
                out = c.all_reduce(np.full(1000, float(r)))
                results[r] = (out, c.connections())
        except BaseException as exc:  # re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30.0)
    assert not errors, errors
    for r in range(n):
        out, conns = results[r]  # type: ignore[misc]
        np.testing.assert_array_equal(out, np.full(1000, float(sum(range(n)))))
        sent = [x for x in conns if x.direction == "out"]
        assert [(x.local[0], x.local[1], x.remote[0]) for x in sent] == [
            (hosts[r], ports[n + r], hosts[(r + 1) % n])
        ]
        received = [x for x in conns if x.direction == "in"]
        assert [x.remote[0] for x in received] == [hosts[(r - 1) % n]]
