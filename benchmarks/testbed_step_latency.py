"""What one synchronous ring step costs on the testbed beyond its bytes, per TCP segment size.

Builds ``crux_testbed`` at the run's default rate scale (125 Mbit/s host links, 62.5 Mbit/s ToR-Agg
uplinks), tuned as ``testbed run`` tunes it (8 MiB class queues, no slow start after idle), and for
each segment size (``gso_max_size`` of the host NICs) times a ring of two ranks, ``h0/nic0 <-> h4/nic0``
(four shaped hops each way: host, ToR, Agg, ToR), in the top class: every step each rank sends
``CHUNK`` bytes to the other and waits for the other's, as gloo's ring does. The step's latency is its
median time minus ``CHUNK`` at the path's TCP goodput (the uplink's rate x 1448/1514). Then the same
with a bulk flow of the next class sharing the last hop (``h1/nic0 -> h4/nic0``): the extra time is
the top class waiting for the lower class's segment in service. Prints both, the prediction of the
store-and-forward model (:func:`commsched.experiments.testbed_run.pauses.fill_latency_s`) and the CPU
the machine spent (``/proc/stat``: busy share, softirq seconds).

Run as root: ``PYTHONPATH=src python benchmarks/testbed_step_latency.py [--steps 30]``.
The testbed is named ``h47seg`` and removed at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from commsched.experiments.testbed_run.pauses import fill_latency_s
from commsched.experiments.testbed_run.twin import GOODPUT
from commsched.testbed import build
from commsched.testbed.handle import Testbed
from commsched.testbed.tuning import deepen_queues, segment_packets, steady_tcp, tighten_bursts
from commsched.topology import LinkId, NodeId
from commsched.topology.builders.small import crux_testbed

RATE_SCALE = 0.000625
NAME = "h47seg"
PORT = 14747
BULK_PORT = 14748

_RANK = r"""
import socket, sys, time, json
role, me, peer = sys.argv[1:4]
port, chunk, steps, tos, sport = (int(x) for x in sys.argv[4:9])
gap = float(sys.argv[9])
if role == "b":
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((me, port)); ls.listen(1); print("ready", flush=True); s, _ = ls.accept()
else:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((me, sport))
    for _ in range(100):
        try:
            s.connect((peer, port)); break
        except OSError:
            time.sleep(0.05)
s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
buf, out = bytearray(chunk), bytes(chunk)
import threading
times = []
for i in range(steps + 3):
    t0 = time.monotonic()
    th = threading.Thread(target=s.sendall, args=(out,)); th.start()
    view, got = memoryview(buf), 0
    while got < chunk:
        n = s.recv_into(view[got:]); got += n
        if n == 0: raise SystemExit("peer closed")
    th.join()
    times.append(time.monotonic() - t0)
    time.sleep(gap)
if role == "a":
    print(json.dumps(times[3:]), flush=True)
s.close()
"""

_BULK = r"""
import socket, sys, time
role, me, peer = sys.argv[1:4]
port, tos, secs, sport = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
if role == "sink":
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((me, port)); ls.listen(1); print("ready", flush=True); s, _ = ls.accept()
    t0, n = None, 0
    while True:
        k = len(s.recv(1 << 20))
        if not k: break
        if t0 is None: t0 = time.monotonic()
        n += k
    print(n / max(time.monotonic() - t0, 1e-9) * 8, flush=True)
else:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos); s.bind((me, sport)); s.connect((peer, port))
    data, end = bytes(1 << 18), time.monotonic() + secs
    while time.monotonic() < end: s.sendall(data)
    s.close()
"""


def _cpu() -> tuple[float, float, float]:
    with open("/proc/stat") as fh:
        f = [float(x) for x in fh.readline().split()[1:]]  # jiffies (USER_HZ = 100)
    idle = f[3] + f[4]
    return sum(f) / 100, idle / 100, f[6] / 100


def _spawn(tb: Testbed, host: str, code: str, args: list[str]) -> subprocess.Popen[str]:
    argv = tb.exec_argv(host, [sys.executable, "-c", code, *args])
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)


def _ring(tb: Testbed, chunk: int, steps: int, tos: int, *, sport: int, gap: float) -> list[float]:
    a_ip, b_ip = tb.nic_address("h0/nic0"), tb.nic_address("h4/nic0")
    b = _spawn(tb, "h4", _RANK, ["b", b_ip, a_ip, str(PORT), str(chunk), str(steps), str(tos), "0", str(gap)])
    assert b.stdout is not None
    b.stdout.readline()
    a = _spawn(
        tb, "h0", _RANK, ["a", a_ip, b_ip, str(PORT), str(chunk), str(steps), str(tos), str(sport), str(gap)]
    )
    assert a.stdout is not None
    out = a.stdout.readline()
    a.wait(60)
    b.wait(60)
    return [float(x) for x in json.loads(out)]


def _with_bulk(
    tb: Testbed, chunk: int, steps: int, ports: tuple[int, int], gap: float
) -> tuple[list[float], float]:
    src, dst = tb.nic_address("h1/nic0"), tb.nic_address("h4/nic0")
    secs = steps * (0.05 + gap) + 3
    sink = _spawn(tb, "h4", _BULK, ["sink", dst, src, str(BULK_PORT), "0", "0", "0"])
    assert sink.stdout is not None
    sink.stdout.readline()
    bulk = _spawn(tb, "h1", _BULK, ["src", src, dst, str(BULK_PORT), str(0xA0), str(secs), str(ports[1])])
    time.sleep(1.0)
    try:
        times = _ring(tb, chunk, steps, 0xB8, sport=ports[0], gap=gap)  # class 0
    finally:
        bulk.wait(secs + 30)
        sink.wait(30)
    bulk_bps = float(sink.stdout.readline())
    return times, bulk_bps


def _ack_class_bytes(tb: Testbed) -> tuple[int, int]:
    """Bytes and packets h4/nic0's egress sent in the lowest class: the bulk sink's pure ACKs only
    (its socket is unmarked; the ring's ACKs and data leave in class 0)."""
    end = tb.layout.nic_cable(NodeId("h4/nic0")).a
    text = subprocess.run(
        ["ip", "netns", "exec", tb.layout.node_ns(end), "tc", "-s", "class", "show", "dev", end.iface],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    blocks = text.split("class htb ")
    for b in blocks:
        if b.startswith("1:17 "):
            words = b.split("Sent ")[1].split()
            return int(words[0]), int(words[2])
    return 0, 0


def _same_uplink(tb: Testbed) -> tuple[list[int], tuple[int, int]]:
    """A path of h0/nic0 -> h4/nic0 and source ports that put the ring and h1's bulk on its uplink."""
    topo = tb.topology
    ring = tb.probe(dport=PORT, pairs=[(NodeId("h0/nic0"), NodeId("h4/nic0"))]).pair("h0/nic0", "h4/nic0")
    bulk = tb.probe(dport=BULK_PORT, pairs=[(NodeId("h1/nic0"), NodeId("h4/nic0"))]).pair(
        "h1/nic0", "h4/nic0"
    )
    for links, port in ring.ports.items():
        agg = topo.links[int(links[1])].dst
        for blinks, bport in bulk.ports.items():
            if topo.links[int(blinks[1])].dst == agg:
                return [int(x) for x in links], (port, bport)
    raise SystemExit("no shared uplink found")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--chunk", type=int, default=256 * 1024)
    ap.add_argument("--segments", default="65536,16384,4096,1500")
    ap.add_argument("--gap", type=float, default=0.0, help="seconds each rank waits between steps")
    ap.add_argument("--burst", type=int, default=0, help="HTB burst of every class (0: the fabric's)")
    args = ap.parse_args()
    topo = crux_testbed()
    build.up(topo, name=NAME, rate_scale=RATE_SCALE)
    try:
        tb = Testbed.load(NAME)
        deepen_queues(tb, 8 << 20)
        steady_tcp(tb)
        if args.burst:
            tighten_bursts(tb, args.burst)
        rates = tb.scaled_capacity_bps()
        links, ports = _same_uplink(tb)
        hops = [rates[LinkId(lk)] for lk in links]
        bottleneck = min(hops) * GOODPUT  # bits/s of TCP payload
        for seg in [int(x) for x in args.segments.split(",")]:
            segment_packets(tb, seg)
            t0, i0, s0 = _cpu()
            alone = _ring(tb, args.chunk, args.steps, 0xB8, sport=ports[0], gap=args.gap)
            t1, i1, s1 = _cpu()
            a0, p0 = _ack_class_bytes(tb)
            bulk, bulk_bps = _with_bulk(tb, args.chunk, args.steps, ports, args.gap)
            a1, p1 = _ack_class_bytes(tb)
            bytes_s = args.chunk * 8 / bottleneck
            row = {
                "segment_bytes": seg,
                "gap_s": args.gap,
                "burst_bytes": args.burst or "fabric",
                "step_s": bytes_s,
                "alone_mean_s": statistics.fmean(alone) - bytes_s,
                "alone_median_s": statistics.median(alone) - bytes_s,
                "alone_p90_s": sorted(alone)[int(0.9 * len(alone))] - bytes_s,
                "beside_mean_s": statistics.fmean(bulk) - bytes_s,
                "beside_median_s": statistics.median(bulk) - bytes_s,
                "beside_p90_s": sorted(bulk)[int(0.9 * len(bulk))] - bytes_s,
                "class1_bps": bulk_bps,
                "ack_bytes_per_data_byte": (a1 - a0)
                / max(bulk_bps / 8 * (args.steps * (0.05 + args.gap) + 3), 1),
                "ack_bytes_per_packet": (a1 - a0) / max(p1 - p0, 1),
                "model_fill_s": fill_latency_s(hops, seg),
                "busy_share": 1 - (i1 - i0) / max(t1 - t0, 1e-9),
                "softirq_s_per_step": (s1 - s0) / len(alone),
            }
            print(json.dumps(row), flush=True)
    finally:
        build.down(NAME)


if __name__ == "__main__":
    main()
