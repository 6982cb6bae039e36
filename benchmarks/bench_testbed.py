"""Benchmark: build and tear down the emulated fabric testbed (needs root).

Prints the median ``up`` and ``down`` times of ``crux_testbed`` (12 hosts, 48 NICs, 14 routers,
96 veth pairs) over three builds with their ratio to the targets (20 s and 5 s), then the shaping
error of one TCP flow at link rates from 250 Mbit/s to 4 Gbit/s (the highest within 5 %), then builds
two-layer Clos fabrics of growing size (``a100_8gpu_4nic`` hosts, 4 NICs each) until one takes more
than 60 s to build (or fails) and prints the largest that built within 60 s. Every testbed is
removed in ``finally``; names start with ``csb`` and the process id; state files go to a temporary
directory.

Run (as root): ``.venv/bin/python benchmarks/bench_testbed.py [--max-hosts N]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from commsched.testbed import build, netns
from commsched.testbed.check import measure_shaping
from commsched.testbed.handle import Testbed
from commsched.testbed.state import state_path
from commsched.topology import crux_testbed, two_layer_clos
from commsched.topology.graph import Topology
from commsched.topology.records import NETWORK_LINK_KINDS

SHAPE_RATES_BPS = (2.5e8, 5e8, 1e9, 2e9, 4e9)
SHAPE_TOLERANCE = 0.05
UP_TARGET_S = 20.0
DOWN_TARGET_S = 5.0
LARGEST_WITHIN_S = 60.0
#: (tors, aggs, hosts per ToR), growing
CLOS_SIZES = ((2, 2, 2), (4, 2, 4), (8, 4, 4), (8, 4, 8), (12, 4, 8), (16, 8, 8), (32, 8, 8))


def timed_build(topo: Topology, name: str) -> tuple[float, float]:
    """Seconds to build and to remove one testbed (always removed)."""
    t0 = time.perf_counter()
    try:
        build.up(topo, name=name, rate_scale=0.0025)
        t_up = time.perf_counter() - t0
    finally:
        t1 = time.perf_counter()
        if state_path(name).exists():
            build.down(name)
        t_down = time.perf_counter() - t1
    return t_up, t_down


def _crux_builds(base: str) -> None:
    ups, downs = [], []
    for i in range(3):
        u, d = timed_build(crux_testbed(), f"{base}c{i}")
        ups.append(u)
        downs.append(d)
    up, down = statistics.median(ups), statistics.median(downs)
    print(
        f"crux_testbed up   median {up:6.2f} s of 3 ({', '.join(f'{x:.2f}' for x in ups)}); "
        f"target {UP_TARGET_S:.0f} s, ratio {up / UP_TARGET_S:.3f}"
    )
    print(
        f"crux_testbed down median {down:6.2f} s of 3 ({', '.join(f'{x:.2f}' for x in downs)}); "
        f"target {DOWN_TARGET_S:.0f} s, ratio {down / DOWN_TARGET_S:.3f}"
    )


def _clos_growth(base: str, max_hosts: int) -> None:
    best = None
    for k, (tors, aggs, hpt) in enumerate(CLOS_SIZES):
        if tors * hpt > max_hosts:
            break
        topo = two_layer_clos(tors=tors, aggs=aggs, hosts_per_tor=hpt)
        try:
            u, d = timed_build(topo, f"{base}k{k}")
        except Exception as exc:  # a size the machine cannot hold: report and stop growing
            print(f"two_layer_clos {tors}x{aggs}x{hpt}: failed ({type(exc).__name__}: {exc})")
            break
        print(
            f"two_layer_clos tors={tors} aggs={aggs} hosts/ToR={hpt}: {len(topo.hosts)} hosts, "
            f"{len(topo.hosts) * 4} NICs, up {u:.1f} s, down {d:.1f} s"
        )
        if u > LARGEST_WITHIN_S:
            break
        best = (tors, aggs, hpt, len(topo.hosts), u)
    if best is not None:
        print(
            f"largest two-layer Clos built within {LARGEST_WITHIN_S:.0f} s: tors={best[0]} aggs={best[1]} "
            f"hosts/ToR={best[2]} ({best[3]} hosts) in {best[4]:.1f} s"
        )


def _shaping(base: str) -> None:
    shaped = None
    for k, rate in enumerate(SHAPE_RATES_BPS):
        topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=1, host_template="single_gpu_nic")
        name = f"{base}r{k}"
        slowest = min(lk.capacity_bps for lk in topo.links if lk.kind in NETWORK_LINK_KINDS)
        build.up(topo, name=name, rate_scale=rate / slowest)  # the slowest network link gets `rate`
        try:
            sh = measure_shaping(Testbed.load(name), topo.hosts[0].nics[0], topo.hosts[1].nics[0])
        finally:
            build.down(name)
        print(
            f"shaping at {rate / 1e6:6.0f} Mbit/s: measured {sh.measured_bps / 1e6:7.1f} Mbit/s, "
            f"error {sh.error:.1%} (median of 3 flows of 2 s)"
        )
        if sh.error <= SHAPE_TOLERANCE:
            shaped = rate
    if shaped is not None:
        print(f"highest link rate shaped within {SHAPE_TOLERANCE:.0%}: {shaped / 1e6:.0f} Mbit/s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-hosts", type=int, default=1024, help="stop the Clos growth at this many hosts")
    ap.add_argument("--no-clos", action="store_true", help="skip the growing Clos builds")
    args = ap.parse_args()
    why = netns.missing_capability()
    if why is not None:
        print(f"skipped: {why}")
        return 0
    os.environ.setdefault("COMMSCHED_TESTBED_DIR", tempfile.mkdtemp(prefix="csb"))
    base = f"csb{os.getpid() % 100000}"
    _crux_builds(base)
    if not args.no_clos:
        _clos_growth(base, args.max_hosts)
    _shaping(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
