"""The replies' own source port (probing oracle, reverse direction): the rules' text, and on two
namespaces (root, nftables) a connection whose replies cross the wire from another port while both
sockets see only their own ports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from commsched.runtime.enforce.pinning.replies import replies_base_script, rin_script, rout_script
from commsched.testbed import netns


def test_scripts() -> None:
    base = replies_base_script("t")
    assert "hook postrouting priority 300" in base and "hook prerouting priority raw" in base
    assert "tcp sport set ip daddr . tcp sport . tcp dport map @rout" in base
    assert "tcp sport set ip saddr . tcp dport map @rin" in base
    assert rin_script("t", "10.0.0.2", 5201, [20003, 20001], old=[20009]).splitlines() == [
        "delete element inet t rin { 10.0.0.2 . 20009 }",
        "add element inet t rin { 10.0.0.2 . 20001 : 5201, 10.0.0.2 . 20003 : 5201 }",
    ]
    assert rout_script("t", ("10.0.0.1", 5201, 20001), 23456, replace=True).splitlines() == [
        "delete element inet t rout { 10.0.0.1 . 5201 . 20001 }",
        "add element inet t rout { 10.0.0.1 . 5201 . 20001 : 23456 }",
    ]


SERVER = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.99.0.2", 5201)); s.listen(); c, _ = s.accept(); n = 0
while (d := c.recv(65536)):
    n += len(d)
c.sendall(b"x" * 2_000_000); c.close(); print(n)
"""
CLIENT = """
import socket, sys
s = socket.socket(); s.bind(("10.99.0.1", 20001)); s.connect(("10.99.0.2", 5201))
assert s.getpeername() == ("10.99.0.2", 5201)
s.sendall(b"y" * 1_000_000); s.shutdown(socket.SHUT_WR); n = 0
while (d := s.recv(65536)):
    n += len(d)
print(n)
"""


def _nft(ns: str, script: str) -> None:
    subprocess.run(
        ["nsenter", f"--net=/run/netns/{ns}", "nft", "-f", "-"], input=script, text=True, check=True
    )


def test_replies_leave_from_their_own_port() -> None:
    why = netns.missing_capability()
    if why is not None:
        pytest.skip(why)
    if shutil.which("nft") is None:
        pytest.skip("no nft command (Debian package nftables)")
    a, b = f"pr{os.getpid() % 100000}ra", f"pr{os.getpid() % 100000}rb"
    try:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "add", ns], check=True)
        lines = textwrap.dedent(f"""\
            ip -n {a} link add va type veth peer name vb netns {b}
            ip -n {a} addr add 10.99.0.1/24 dev va
            ip -n {b} addr add 10.99.0.2/24 dev vb
            ip -n {a} link set va up
            ip -n {b} link set vb up""").splitlines()
        for line in lines:
            subprocess.run(line.split(), check=True)
        for ns in (a, b):
            _nft(ns, "add table inet t\n" + replies_base_script("t"))
        _nft(b, rout_script("t", ("10.99.0.1", 5201, 20001), 23456, replace=False))
        _nft(a, rin_script("t", "10.99.0.2", 5201, [20001]))
        wire = "add chain inet t wire { type filter hook prerouting priority -350; }\n"
        wire += "add rule inet t wire tcp sport 23456 counter\nadd rule inet t wire tcp sport 5201 counter\n"
        _nft(a, wire)
        server = subprocess.Popen(
            ["ip", "netns", "exec", b, sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True
        )
        for _ in range(50):
            ss = subprocess.run(
                ["ip", "netns", "exec", b, "ss", "-ltn"], capture_output=True, text=True, check=False
            )
            if ":5201" in ss.stdout:
                break
            subprocess.run(["sleep", "0.1"], check=True)
        client = subprocess.run(
            ["ip", "netns", "exec", a, sys.executable, "-c", CLIENT],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert client.returncode == 0, client.stderr
        assert int(client.stdout) == 2_000_000
        assert int(server.communicate(timeout=30)[0]) == 1_000_000
        listed = subprocess.run(
            ["nsenter", f"--net=/run/netns/{a}", "nft", "list", "chain", "inet", "t", "wire"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        counts = {int(x.split("sport ")[1].split()[0]): int(x.split("packets ")[1].split()[0])
                  for x in listed.splitlines() if "counter packets" in x}  # fmt: skip
        assert counts[23456] > 10 and counts[5201] == 0  # every reply crossed the wire from 23456
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
        assert not [x for x in netns.list_namespaces() if x in (a, b)]
