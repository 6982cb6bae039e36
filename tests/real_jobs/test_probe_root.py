"""The probing oracle on the emulated fabric (root): it agrees with the routers' own routes, within its
budget, with the routers' default ICMP limits; with one router's ICMP answers dropped nothing hangs
and every port it gives is right."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from commsched.testbed import Testbed, build, netns
from commsched.testbed.probe import trace_tuples
from commsched.testbed.state import state_path
from commsched.topology import crux_testbed

pytestmark = pytest.mark.slow

CHILD = r"""
import json, sys, time
from commsched.runtime.enforce.pinning.pathprobe import FabricMap, ProbeSettings
from commsched.runtime.enforce.pinning.oracle import PortSearch
from commsched.runtime.enforce.pinning.probeoracle import ProbeOracle
job = json.load(sys.stdin)
oracle = ProbeOracle(FabricMap.from_testbed(job["name"]))
t = time.monotonic()
traced = oracle.probing.trace([tuple(f) for f in job["flows"]])
out = {"links": [x.links for x in traced], "reasons": [x.reason for x in traced],
       "trace_s": time.monotonic() - t, "sent": oracle.probing.sent, "finds": []}
for src, dst, dport, links in job["finds"]:
    t = time.monotonic()
    got = oracle.find(PortSearch(src=src, dst=dst, dport=dport, forward=tuple(links), reverse=None))
    out["finds"].append({"ports": got.ports, "pinned": got.pinned, "reason": got.reason,
                         "s": time.monotonic() - t})
out["stats"] = oracle.stats()
print(json.dumps(out))
"""


def _child(tb: Testbed, host: str, job: dict[str, object], timeout_s: float) -> dict[str, object]:
    argv = tb.nsenter_argv(host, [sys.executable, "-c", CHILD])
    proc = subprocess.run(
        argv, input=json.dumps(job), capture_output=True, text=True, timeout=timeout_s, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout))


@pytest.fixture
def fabric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    why = netns.missing_capability()
    if why is not None:
        pytest.skip(why)
    monkeypatch.setenv("COMMSCHED_TESTBED_DIR", str(tmp_path))
    name = f"pr{os.getpid() % 100000}"
    try:
        build.up(crux_testbed(), name=name, rate_scale=0.0025)
        yield Testbed.load(name)
    finally:
        if state_path(name).exists():
            build.down(name)
        assert [ns for ns in netns.list_namespaces() if ns.startswith(f"{name}-")] == []


def test_probing_agrees_with_the_routers(fabric: Testbed) -> None:
    tb = fabric
    lay = tb.layout
    rng = random.Random(7)
    nic_of = {ip: n for n, ip in lay.nic_ip.items()}
    total = agree = 0
    for host in [str(h.id) for h in tb.topology.hosts]:
        mine = [ip for ip, n in nic_of.items() if lay.nic_host[n] == host]
        other = [ip for ip, n in nic_of.items() if lay.nic_host[n] != host]
        flows = [
            (rng.choice(mine), rng.choice(other), rng.randrange(20000, 60000), rng.randrange(1024, 60000))
            for _ in range(17)
        ]
        got = _child(tb, host, {"name": tb.name, "flows": flows, "finds": []}, timeout_s=60)
        truth = trace_tuples(lay, [(nic_of[s], nic_of[d], sp, dp) for s, d, sp, dp in flows])
        total += len(flows)
        agree += sum(tuple(a) == tuple(b) for a, b in zip(got["links"], truth, strict=True))  # type: ignore[call-overload]
        assert float(got["trace_s"]) < 2.5  # type: ignore[arg-type]
        assert int(got["sent"]) <= len(flows)  # type: ignore[call-overload]
    assert total >= 200 and agree == total


def test_silent_router_pins_or_reports(fabric: Testbed) -> None:
    tb = fabric
    lay = tb.layout
    nic_of = {ip: n for n, ip in lay.nic_ip.items()}
    agg = f"{tb.name}-agg3"
    subprocess.run(["ip", "-n", agg, "rule", "add", "pref", "5", "ipproto", "icmp", "blackhole"], check=True)
    try:
        src = tb.nic_address("h0/nic0")
        finds = []
        for dst_host in ("h4", "h8", "h11"):
            dst = tb.nic_address(f"{dst_host}/nic0")
            paths = tb.topology.equal_cost_paths(nic_of[src], nic_of[dst])
            via = next(p for p in paths if "agg3" in p.nodes)
            other = next(p for p in paths if "agg3" not in p.nodes)
            finds += [(src, dst, 5201, list(via.links)), (src, dst, 5201, list(other.links))]
        flows = [(src, tb.nic_address("h9/nic0"), p, 7000) for p in range(30000, 30030)]
        t = time.monotonic()
        got = _child(tb, "h0", {"name": tb.name, "flows": flows, "finds": finds}, timeout_s=120)
        assert time.monotonic() - t < 60
    finally:
        subprocess.run(["ip", "-n", agg, "rule", "del", "pref", "5"], check=False)
    truth = trace_tuples(lay, [(nic_of[s], nic_of[d], sp, dp) for s, d, sp, dp in flows])
    for links, reason, real in zip(got["links"], got["reasons"], truth, strict=True):  # type: ignore[call-overload]
        assert tuple(links) in ((), tuple(real)), reason
        assert links or "did not answer" in reason
    for (s, d, dport, links), f in zip(finds, got["finds"], strict=True):  # type: ignore[call-overload]
        assert f["s"] < 7.0  # within TCP's third SYN retransmission
        assert f["ports"] or (not f["pinned"] and f["reason"])
        real = trace_tuples(lay, [(nic_of[s], nic_of[d], p, dport) for p in f["ports"]])
        assert all(tuple(r) == tuple(links) for r in real), f["reason"]
    assert got["stats"]["silent"] == ["agg3"]  # type: ignore[index]
