"""Parameter-server runtime benchmarks (issue: summation service and Mercury transport speed).

1. Summation service: fp32 in-place sums into a 64 MiB part (one core, NumPy), GB/s of incoming
   gradient; the target is >= 8 GB/s. Reference in the same run: a plain ``np.copyto`` of 64 MiB.
2. Mercury transport on loopback: 2 workers + 1 server processes, one 100 MB tensor, goodput per
   worker (bytes pushed per second; the same bytes come back summed); reference in the same run: raw
   TCP goodput per flow with two flows on loopback. Target: >= 8 Gb/s per worker.

Run: ``.venv/bin/python benchmarks/bench_ps.py [--repeat 3]``. Prints medians (the box is shared).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np

from commsched.runtime.ps.bench import JobSpec, run_job
from commsched.runtime.ps.emulate import EmulatedLayer
from commsched.runtime.ps.shaped_link import LoopbackLink
from commsched.runtime.ps.summation import Summation
from commsched.runtime.ps.transports import TransportConfig

PART = 64 << 20  # bytes


def summation_gbps(rounds: int = 20) -> tuple[float, float]:
    """(sum GB/s, copy GB/s) on 64 MiB fp32 parts."""
    s = Summation(num_workers=rounds + 1, reply=lambda *a: None)
    s.declare(key=1, nbytes=PART, dtype=0)
    payload = np.random.default_rng(0).random(PART // 4, dtype=np.float32).tobytes()
    s.push(worker=0, key=1, offset=0, payload=payload)  # first push copies
    t0 = time.perf_counter()
    for w in range(1, rounds + 1):
        s.push(worker=w, key=1, offset=0, payload=payload)
    t_sum = time.perf_counter() - t0
    dst = np.empty(PART // 4, np.float32)
    src = np.frombuffer(payload, np.float32)
    t0 = time.perf_counter()
    for _ in range(rounds):
        np.copyto(dst, src)
    t_copy = time.perf_counter() - t0
    return rounds * PART / t_sum / 1e9, rounds * PART / t_copy / 1e9


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
    merc, raw = [], []
    for _ in range(args.repeat):
        raw.append(raw_tcp_gbps())
        merc.extend(mercury_gbps())
    m_med, r_med = statistics.median(merc), statistics.median(raw)
    print(
        f"mercury loopback 2 workers + 1 server, 100 MB: {m_med:.2f} Gb/s per worker (target 8); "
        f"raw TCP {r_med:.2f} Gb/s per flow; ratio {m_med / r_med:.2f}"
    )


if __name__ == "__main__":
    main()
