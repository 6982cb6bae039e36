"""A ring step after a pause crosses the tuned testbed at its bytes' time, as a switch port would send
it (root; slow; about 40 s).

The fabric's HTB classes have a burst of 64 KiB (at least; ~1 ms of the rate): a bucket fills while its
link idles and then sends that much at once, so on ``crux_testbed`` at the run's default rate scale a
256 KiB step that follows a 10 ms pause crossed the 62.5 Mbit/s uplink about 9 ms sooner than its
bytes at the link's goodput (``benchmarks/testbed_step_latency.py``; docs/testbed-run.md). A switch has
no such bucket. :func:`commsched.testbed.tuning.tighten_bursts` sets every class's burst to one segment;
the step then takes its bytes' time within the machine's noise.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from commsched.experiments.testbed_run.twin import GOODPUT
from commsched.testbed import build
from commsched.testbed.handle import Testbed
from commsched.testbed.state import state_path
from commsched.testbed.tuning import (
    deepen_queues,
    segment_packets,
    steady_tcp,
    tight_burst_bytes,
    tighten_bursts,
)
from commsched.topology.builders.small import crux_testbed

RATE = 0.000625
CHUNK = 256 * 1024
PORT = 14749

_RANK = r"""
import socket, sys, threading, time, json
role, me, peer = sys.argv[1:4]
chunk, steps, gap = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
if role == "b":
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((me, %d)); ls.listen(1); print("ready", flush=True); s, _ = ls.accept()
else:
    s = socket.socket(); s.bind((me, 0)); s.connect((peer, %d))
s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0xb8)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
buf, out, times = bytearray(chunk), bytes(chunk), []
for i in range(steps + 3):
    t0 = time.monotonic()
    th = threading.Thread(target=s.sendall, args=(out,)); th.start()
    view, got = memoryview(buf), 0
    while got < chunk:
        n = s.recv_into(view[got:]); got += n
        if n == 0: raise SystemExit("peer closed")
    th.join(); times.append(time.monotonic() - t0); time.sleep(gap)
if role == "a": print(json.dumps(times[3:]), flush=True)
""" % (PORT, PORT)  # noqa: UP031


def _ring_steps(tb: Testbed, steps: int, gap_s: float) -> list[float]:
    a_ip, b_ip = tb.nic_address("h0/nic0"), tb.nic_address("h4/nic0")
    args = [str(CHUNK), str(steps), str(gap_s)]
    with subprocess.Popen(
        tb.exec_argv("h4", [sys.executable, "-c", _RANK, "b", b_ip, a_ip, *args]),
        stdout=subprocess.PIPE,
        text=True,
    ) as b:
        try:
            assert b.stdout is not None
            b.stdout.readline()
            a = subprocess.run(tb.exec_argv("h0", [sys.executable, "-c", _RANK, "a", a_ip, b_ip, *args]),
                               capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
            return [float(x) for x in json.loads(a.stdout.splitlines()[-1])]
        finally:
            b.kill()


@pytest.mark.slow
def test_a_step_after_a_pause_takes_its_bytes_time_once_the_bursts_are_tight(
    root: None, state_dir: Path
) -> None:
    name = f"h47b{os.getpid() % 100000}"
    topo = crux_testbed()
    build.up(topo, name=name, rate_scale=RATE)
    try:
        tb = Testbed.load(name)
        deepen_queues(tb, 8 << 20)
        steady_tcp(tb)
        segment_packets(tb, 16384)
        bytes_s = CHUNK * 8 / (100e9 * RATE * GOODPUT)  # the uplink's TCP goodput, bits/s
        loose = statistics.fmean(_ring_steps(tb, 40, 0.01)) - bytes_s
        tighten_bursts(tb, tight_burst_bytes(16384))
        tight = statistics.fmean(_ring_steps(tb, 40, 0.01)) - bytes_s
    finally:
        if state_path(name).exists():
            build.down(name)
    # the fabric's bursts: the step beats its bytes by most of a 64 KiB bucket at 62.5 Mbit/s (8.4 ms)
    assert loose < -0.005, f"fabric bursts: step {loose * 1e3:+.2f} ms against its bytes"
    assert abs(tight) < 0.003, f"tight bursts: step {tight * 1e3:+.2f} ms against its bytes"
