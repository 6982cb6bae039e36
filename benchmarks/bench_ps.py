"""Parameter-server runtime benchmarks (issue: summation service and Mercury transport speed).

1. Summation service: fp32 in-place sums into a 64 MiB part (one core, NumPy), GB/s of incoming
   gradient; the target is >= 8 GB/s. Reference in the same run: a plain ``np.copyto`` of 64 MiB.
2. Mercury transport on loopback: 2 workers + 1 server processes, one 100 MB tensor, goodput per
   worker (bytes pushed per second; the same bytes come back summed); reference in the same run: raw
   TCP goodput per flow with two flows on loopback, and raw TCP in the same pattern (two client
   processes each send 100 MB to one server process that sends them straight back). Target: >= 8
   Gb/s per worker.

Run: ``.venv/bin/python benchmarks/bench_ps.py [--repeat 3]``. Prints medians (the box is shared).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import socket
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

from commsched.experiments.ps.bench import JobSpec, run_job
from commsched.experiments.ps.emulate import EmulatedLayer
from commsched.runtime.ps.frame import new_buffer
from commsched.runtime.ps.summation import Summation
from commsched.runtime.ps.transports import TransportConfig
from commsched.testbed.shaped_link import LoopbackLink

PART = 64 << 20  # bytes


def summation_gbps(rounds: int = 20) -> tuple[float, float]:
    """(sum GB/s, copy GB/s) on 64 MiB fp32 parts: medians over ``rounds`` pushes, each followed by a
    copy of the same bytes (interleaved, so both see the same memory bandwidth of a shared host)."""
    s = Summation(num_workers=rounds + 1, reply=lambda *a: None)
    s.declare(key=1, nbytes=PART, dtype=0)
    payload = new_buffer(PART)  # where the server receives a push
    np.frombuffer(payload, np.float32)[:] = np.random.default_rng(0).random(PART // 4, dtype=np.float32)
    s.push(worker=0, key=1, offset=0, payload=payload)  # first push copies
    dst = np.empty(PART // 4, np.float32)
    src = np.frombuffer(payload, np.float32)
    np.copyto(dst, src)  # first touch of dst outside the timing
    sums, copies = [], []
    for w in range(1, rounds + 1):
        t0 = time.perf_counter()
        s.push(worker=w, key=1, offset=0, payload=payload)
        t1 = time.perf_counter()
        np.copyto(dst, src)
        t2 = time.perf_counter()
        sums.append(PART / (t1 - t0) / 1e9)
        copies.append(PART / (t2 - t1) / 1e9)
    return statistics.median(sums), statistics.median(copies)


def raw_tcp_gbps(flows: int = 2, duration_s: float = 1.5) -> float:
    """Raw TCP goodput per flow on loopback, Gb/s."""
    py = [sys.executable, "-m", "commsched.runtime.ps"]
    sink = subprocess.Popen(
        [*py, "sink", "127.0.0.1", str(flows), str(duration_s)], stdout=subprocess.PIPE, text=True
    )
    assert sink.stdout is not None
    port = sink.stdout.readline().strip()
    srcs = [subprocess.Popen([*py, "source", "127.0.0.1", port, str(duration_s + 0.5)]) for _ in range(flows)]
    out, _ = sink.communicate()
    for p in srcs:
        p.wait()
    return float(json.loads(out.strip().splitlines()[-1])["goodput_bps"]) / flows / 1e9


def _echo_server(listener: socket.socket, clients: int) -> None:
    """Send every byte each client sends straight back (one thread per client, 1 MiB reads)."""

    def serve(conn: socket.socket) -> None:
        buf = memoryview(bytearray(1 << 20))
        with conn:
            while k := conn.recv_into(buf):
                conn.sendall(buf[:k])

    conns = [listener.accept()[0] for _ in range(clients)]
    threads = [threading.Thread(target=serve, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _echo_client(port: int, nbytes: int, rounds: int, out: mp.Queue) -> None:  # type: ignore[type-arg]
    """Send ``nbytes`` and receive them back ``rounds`` times; put the Gb/s of each round."""
    sock = socket.create_connection(("127.0.0.1", port))
    src = memoryview(bytearray(nbytes))
    dst = memoryview(bytearray(1 << 20))
    rates = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        sender = threading.Thread(target=sock.sendall, args=(src,))
        sender.start()
        got = 0
        while got < nbytes:
            got += sock.recv_into(dst)
        sender.join()
        rates.append(nbytes * 8 / (time.perf_counter() - t0) / 1e9)
    sock.close()
    out.put(rates)


def echo_gbps(nbytes: int = 100_000_000, clients: int = 2, rounds: int = 3) -> float:
    """Raw TCP in Mercury's traffic pattern: ``clients`` processes each send ``nbytes`` to one server
    process that sends them straight back (no framing, no sums); Gb/s per client, median round.
    The most any parameter server could move per worker on this host."""
    ctx = mp.get_context("fork")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    out: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    server = ctx.Process(target=_echo_server, args=(listener, clients))
    server.start()
    procs = [ctx.Process(target=_echo_client, args=(port, nbytes, rounds, out)) for _ in range(clients)]
    for p in procs:
        p.start()
    rates: list[float] = [float(r) for _ in procs for r in out.get(timeout=120)]
    for p in [*procs, server]:
        p.join(30)
    listener.close()
    return statistics.median(rates)


def mercury_gbps(model_bytes: int = 100_000_000) -> list[float]:
    """Mercury goodput per worker (Gb/s) per iteration: 2 workers + 1 server processes on loopback."""
    spec = JobSpec(layers=(EmulatedLayer(name="model", elements=model_bytes // 4, fp_s=0.0, bp_s=0.0),),
                   num_workers=2, iterations=3, warmup=1, timeout_s=120)  # fmt: skip
    run = run_job(LoopbackLink(), TransportConfig(name="mercury"), spec)
    # bytes -> bits
    return [model_bytes * 8 / t / 1e9 for t in run.iteration_s]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sums = [summation_gbps() for _ in range(args.repeat)]
    s_med = statistics.median(x for x, _ in sums)
    c_med = statistics.median(y for _, y in sums)
    print(f"summation fp32, 64 MiB parts: {s_med:.1f} GB/s per core (target 8; np.copyto {c_med:.1f} GB/s; "
          f"ratio {s_med / c_med:.2f})")  # fmt: skip
    merc, raw, echo = [], [], []
    for _ in range(args.repeat):
        raw.append(raw_tcp_gbps())
        echo.append(echo_gbps())
        merc.extend(mercury_gbps())
    m_med, r_med, e_med = statistics.median(merc), statistics.median(raw), statistics.median(echo)
    print(
        f"mercury loopback 2 workers + 1 server, 100 MB: {m_med:.2f} Gb/s per worker pushed, the same "
        f"summed back ({2 * m_med:.2f} Gb/s both ways; target 8); "
        f"raw TCP {r_med:.2f} Gb/s per flow (ratio {m_med / r_med:.2f}); raw TCP echo through one "
        f"server process, 2 clients: {e_med:.2f} Gb/s per client (ratio {m_med / e_med:.2f})"
    )


if __name__ == "__main__":
    main()
