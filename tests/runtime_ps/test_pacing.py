"""Pacing each connection by its share of its NICs' bytes: the plan, the socket option, the hooks."""

from __future__ import annotations

import doctest
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import commsched.runtime.ps.pacing as pacing_module
from commsched.errors import InputError
from commsched.experiments.ps.versus_ring import VersusSpec
from commsched.runtime.ps.client import PSClient
from commsched.runtime.ps.errors import PSError
from commsched.runtime.ps.pacing import pace_socket, paced_rate, server_host, share_pacing
from commsched.runtime.ps.server import Server
from commsched.runtime.ps.transports import TransportConfig
from commsched.testbed.fabric import star_fabric

GOODPUT_BPS = 1.914e8


def test_doctests() -> None:
    result = doctest.testmod(pacing_module)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(("n", "k", "tensors"), [(4, 2, 200), (4, 2, 16), (3, 1, 50), (6, 3, 120)])
def test_plan_fills_the_busiest_nic_and_no_nic_beyond_its_goodput(n: int, k: int, tensors: int) -> None:
    spec = VersusSpec(workers=n, cpu_machines=k, model_bytes=16_000_000, tensors=tensors)
    shares = spec.shares()
    plan = share_pacing(shares, workers=n, cpu_machines=k, goodput_bps=GOODPUT_BPS)
    nic = GOODPUT_BPS / 8  # bits -> bytes
    up, down = [0.0] * (n + k), [0.0] * (n + k)
    busiest_s = max(plan.nic_load) * spec.model_bytes / nic  # the model's iteration: busiest NIC at full rate
    for j, share in enumerate(shares):
        h = server_host(j, workers=n, cpu_machines=k)
        for r in range(n):
            push, reply = plan.push_bytes_s[r][j], plan.reply_bytes_s[j][r]
            if r == h or share == 0:  # loopback to the co-located server, or no bytes: never paced
                assert push is None and reply is None
                continue
            assert push is not None and reply is not None and push == reply
            up[r] += push
            down[h] += push
            up[h] += reply
            down[r] += reply
            # every flow finishes within the busiest NIC's time; those through the busiest NIC exactly then
            t = share * spec.model_bytes / push
            assert t <= busiest_s * (1 + 1e-9)
            if max(plan.nic_load[r], plan.nic_load[h]) == max(plan.nic_load):
                assert t == pytest.approx(busiest_s)
    for h in range(n + k):
        assert up[h] <= nic * (1 + 1e-9) and down[h] <= nic * (1 + 1e-9)
        # a NIC's flows together run at the goodput scaled by how loaded the NIC is against its peers
        assert max(up[h], down[h]) >= nic * plan.nic_load[h] / max(plan.nic_load) * (1 - 1e-9)
    assert max(*up, *down) == pytest.approx(nic)
    # the busiest load is the busiest NIC of `VersusSpec.split_speedup`
    assert 2 * (n - 1) / n / max(plan.nic_load) == pytest.approx(spec.split_speedup())


def test_plan_rejects_bad_input() -> None:
    with pytest.raises(InputError, match="shares"):
        share_pacing([0.5, 0.5], workers=2, cpu_machines=1, goodput_bps=1e8)
    with pytest.raises(InputError, match="pacing"):
        share_pacing([0.5, 0.25, 0.25], workers=2, cpu_machines=1, goodput_bps=0.0)


def test_pace_socket_sets_and_reads_back_the_rate() -> None:
    with socket.socket() as s:
        assert paced_rate(s) is None
        pace_socket(s, None)
        assert paced_rate(s) is None
        pace_socket(s, 1_250_000.4)
        assert paced_rate(s) == 1_250_000
        with pytest.raises(InputError, match="pacing rate"):
            pace_socket(s, 0.0)


def _push_pull_s(client_rate: float | None, server_rate: float | None, nbytes: int) -> tuple[float, float]:
    """Seconds of one push_pull of ``nbytes`` by one worker through loopback, and its error."""
    x = np.random.default_rng(0).standard_normal(nbytes // 4).astype(np.float32)
    server = Server(num_workers=1, pacing_bytes_s={0: server_rate}).start()
    try:
        with PSClient(servers=[server.address], rank=0, num_workers=1, transport=TransportConfig(),
                      pacing_bytes_s=[client_rate]) as c:  # fmt: skip
            t0 = time.perf_counter()
            out = c.push_pull(x, name="g", timeout_s=30)
            return time.perf_counter() - t0, float(np.max(np.abs(out - x)))
    finally:
        server.stop()


def test_client_and_server_hooks_pace_their_sockets() -> None:
    # 2 MB each way at 4 MB/s: ~0.5 s to push, ~0.5 s to pull the sum back, less the first window
    # TCP sends unpaced (measured 0.43-0.46 s one way, 0.88 s both; unpaced the push_pull takes ~10 ms)
    for client_rate, server_rate, least_s in ((4e6, None, 0.35), (None, 4e6, 0.35), (4e6, 4e6, 0.7)):
        took, err = _push_pull_s(client_rate, server_rate, 2_000_000)
        assert err == 0.0
        assert took > least_s, (client_rate, server_rate, took)
    with pytest.raises(PSError, match="pacing rates"):
        PSClient(servers=[("127.0.0.1", 9)], rank=0, num_workers=1, transport=TransportConfig(),
                 pacing_bytes_s=[1e6, 1e6])  # fmt: skip
    with pytest.raises(InputError, match="pacing rate"):
        Server(num_workers=1, pacing_bytes_s={0: -1.0})


RATE_BPS = 2e8
SINK = r"""
import json, socket, sys, threading, time
flows, window = int(sys.argv[2]), float(sys.argv[3])
listener = socket.create_server((sys.argv[1], 0))
print(listener.getsockname()[1], flush=True)
# by source address (host 1 before host 2), not by arrival: under load the processes start in any order
socks = sorted((listener.accept()[0] for _ in range(flows)), key=lambda s: s.getpeername()[0])
counts = [0] * flows
def drain(i, s):
    buf = bytearray(1 << 20)
    while (got := s.recv_into(buf)):
        counts[i] += got
threads = [threading.Thread(target=drain, args=(i, s), daemon=True) for i, s in enumerate(socks)]
for t in threads:
    t.start()
time.sleep(0.5)
marks, t0 = list(counts), time.monotonic()
time.sleep(window)
print(json.dumps([(c - m) / (time.monotonic() - t0) for c, m in zip(counts, marks)]), flush=True)
"""
SOURCE = r"""
import socket, sys, time
from commsched.runtime.ps.pacing import pace_socket
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
rate = float(sys.argv[3])
pace_socket(s, rate if rate > 0 else None)
payload, end = bytearray(1 << 20), time.monotonic() + float(sys.argv[4])
try:
    while time.monotonic() < end:
        s.sendall(payload)
except OSError:
    pass
"""


@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("tc") is None, reason="needs root and iproute2 (namespaces, tc)"
)
def test_a_paced_flow_moves_its_rate_through_a_shaped_nic() -> None:
    """Beside an unpaced flow into the same star NIC, the paced one gets its rate, the other the rest."""
    paced_bytes_s = 8e6  # 64 Mb/s of the NIC's ~191 Mb/s goodput
    procs: list[subprocess.Popen[str]] = []
    with star_fabric(RATE_BPS, hosts=3, prefix="cs7t", queue_bytes=4_000_000) as fab:
        try:
            sink = subprocess.Popen(fab.argv(0, [sys.executable, "-c", SINK, fab.host_ip[0], "2", "2.5"]),
                                    stdout=subprocess.PIPE, text=True)  # fmt: skip
            procs.append(sink)
            assert sink.stdout is not None
            port = sink.stdout.readline().strip()
            for host, rate in ((1, paced_bytes_s), (2, 0.0)):
                argv = [sys.executable, "-c", SOURCE, fab.host_ip[0], port, str(rate), "3.5"]
                procs.append(subprocess.Popen(fab.argv(host, argv), text=True))
            got = json.loads(sink.communicate(timeout=30)[0].strip().splitlines()[-1])
        finally:
            for p in procs:
                p.kill()
                p.wait()
    paced, unpaced = got
    print(
        f"\nFIGURE ps-pacing: paced_bytes_s={paced:.4g} (asked {paced_bytes_s:.4g}) "
        f"unpaced_bytes_s={unpaced:.4g} nic_bytes_s={RATE_BPS / 8:.4g} load1={os.getloadavg()[0]:.2f}"
    )
    assert 0.9 * paced_bytes_s < paced < 1.02 * paced_bytes_s
    assert unpaced > 1.5 * paced  # the unpaced flow takes the rest of the NIC, not a fair half
    assert 0.85 * RATE_BPS / 8 < paced + unpaced <= 1.02 * RATE_BPS / 8
