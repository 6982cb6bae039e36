"""BytePS on the ``ps versus-ring`` star under max-min fair sharing: a fluid estimate of one iteration.

``commsched byteps`` (``byteps_times``) takes the busiest NIC's bytes at full rate, i.e. a schedule
that keeps that NIC busy in both directions for the whole iteration. TCP shares each NIC max-min
among its flows instead. This script replays one BytePS iteration as fluid flows under max-min
sharing (progressive filling every millisecond): every worker pushes each server its share of the
model, and each server's replies to a worker can only carry parts that all workers have pushed
(the co-located worker's own push is local). The shares are the mixed-mode hash's real split of the
same tensors (:class:`commsched.experiments.ps.versus_ring.VersusSpec`). It also replays the
iteration with every flow held to its pacing rate (``ps versus-ring --pace-by-share``,
:func:`commsched.runtime.ps.pacing.share_pacing`), the schedule ``commsched byteps`` assumes.

Run: ``python -m commsched.experiments.byteps_maxmin [--workers 4 --cpu-machines 2 --mbytes 16
--goodput-gbps 0.1914]`` (0.1914 Gb/s: the goodput ``ps versus-ring`` measures at 0.2 Gb/s).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from commsched.experiments.ps.versus_ring import VersusSpec
from commsched.intrajob.byteps import byteps_assignment, byteps_times
from commsched.runtime.ps.pacing import SharePacing, share_pacing

DT_S = 1e-3


@dataclass(frozen=True, slots=True)
class Flow:
    src: int
    dst: int
    nbytes: float
    pull: bool
    server: int
    pace: float  # bytes/s the flow is paced to (inf: not paced)


def _flows(n: int, k: int, model_bytes: float, shares: list[float], plan: SharePacing | None) -> list[Flow]:
    """Hosts 0..n-1 are workers (server k+i co-located on worker i), n..n+k-1 the CPU machines."""
    host_of = [n + j for j in range(k)] + list(range(n))  # server index -> host
    out = []
    for s, share in enumerate(shares):
        h = host_of[s]
        for w in range(n):
            if w != h:
                push = (plan.push_bytes_s[w][s] if plan else None) or np.inf
                reply = (plan.reply_bytes_s[s][w] if plan else None) or np.inf
                out.append(Flow(w, h, model_bytes * share, False, h, push))
                out.append(Flow(h, w, model_bytes * share, True, h, reply))
    return out


def _maxmin(flows: list[Flow], caps: np.ndarray, capacity: float, hosts: int) -> np.ndarray:
    """Max-min rates of ``flows`` (each at most ``caps``) on every host's uplink and downlink."""
    rate = np.zeros(len(flows))
    frozen = caps <= 0
    links = [np.array([f.src == h for f in flows]) for h in range(hosts)]
    links += [np.array([f.dst == h for f in flows]) for h in range(hosts)]
    left = np.full(len(links), capacity)
    while not frozen.all():
        live = ~frozen
        fair = [left[i] / (m & live).sum() for i, m in enumerate(links) if (m & live).any()]
        inc = min([*fair, float((caps - rate)[live].min())])
        rate[live] += inc
        for i, m in enumerate(links):
            left[i] -= inc * (m & live).sum()
            if left[i] <= 1e-6 * capacity:
                frozen |= m
        frozen |= rate >= caps - 1e-9
    return rate


def iteration_s(
    n: int, k: int, model_bytes: float, shares: list[float], capacity: float, *, paced: bool = False
) -> float:
    """Seconds until every push and pull of one iteration is done under max-min sharing (``paced``:
    every flow at most its pacing rate at NIC goodput ``capacity`` bytes/s)."""
    plan = share_pacing(shares, workers=n, cpu_machines=k, goodput_bps=capacity * 8) if paced else None
    flows = _flows(n, k, model_bytes, shares, plan)
    size = np.array([f.nbytes for f in flows])
    pace = np.array([f.pace for f in flows])
    sent = np.zeros(len(flows))
    pushes = {h: [i for i, f in enumerate(flows) if not f.pull and f.server == h] for h in range(n + k)}
    t = 0.0
    while (sent < size - 1).any():
        caps = np.where(sent < size - 1, pace, 0.0)
        for i, f in enumerate(flows):
            if f.pull:  # only parts every worker has pushed can come back
                done = min(sent[j] / size[j] for j in pushes[f.server])
                caps[i] = min(caps[i], max(0.0, done * size[i] - sent[i]) / DT_S)
        sent = np.minimum(size, sent + _maxmin(flows, caps, capacity, n + k) * DT_S)
        t += DT_S
    return t


@dataclass(frozen=True, slots=True, kw_only=True)
class MaxMinEstimate:
    """One BytePS iteration (s) under max-min sharing and paced by share, beside the two models."""

    maxmin_s: float
    paced_s: float
    busiest_nic_s: float
    allreduce_s: float
    model_speedup: float


def estimate(spec: VersusSpec, *, goodput_bps: float) -> MaxMinEstimate:
    """The fluid replays of ``spec``'s BytePS iteration at ``goodput_bps`` per NIC, and the models.

    Examples
    --------
    >>> spec = VersusSpec(workers=4, cpu_machines=2, model_bytes=4_000_000, tensors=50)
    >>> e = estimate(spec, goodput_bps=1e8)
    >>> e.busiest_nic_s < e.allreduce_s and e.maxmin_s >= e.busiest_nic_s * 0.99
    True
    """
    n, k = spec.workers, spec.cpu_machines
    capacity = goodput_bps / 8  # bits/s -> bytes/s
    times = byteps_times(
        byteps_assignment(gpu_machines=n, cpu_machines=k, model_bytes=spec.model_bytes),
        bandwidth_bps=goodput_bps,
    )
    return MaxMinEstimate(
        maxmin_s=iteration_s(n, k, spec.model_bytes, spec.shares(), capacity),
        paced_s=iteration_s(n, k, spec.model_bytes, spec.shares(), capacity, paced=True),
        busiest_nic_s=times.byteps_s,
        allreduce_s=times.allreduce_s,
        model_speedup=times.speedup_vs_allreduce,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Print the estimate for the command line's shape (``--help`` lists the options)."""
    ap = argparse.ArgumentParser(
        prog="python -m commsched.experiments.byteps_maxmin", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--cpu-machines", type=int, default=2)
    ap.add_argument("--mbytes", type=float, default=16.0)
    ap.add_argument("--tensors", type=int, default=200)
    ap.add_argument("--goodput-gbps", type=float, default=0.1914)
    a = ap.parse_args(argv)
    spec = VersusSpec(workers=a.workers, cpu_machines=a.cpu_machines, model_bytes=int(a.mbytes * 1e6),
                      tensors=a.tensors)  # fmt: skip
    e = estimate(spec, goodput_bps=a.goodput_gbps * 1e9)
    print(f"BytePS iteration, max-min fluid: {e.maxmin_s:.3f} s; paced by share: {e.paced_s:.3f} s; "
          f"busiest-NIC model (commsched byteps): {e.busiest_nic_s:.3f} s; "
          f"ring all-reduce model: {e.allreduce_s:.3f} s")  # fmt: skip
    print(f"speed-up over the ring: max-min {e.allreduce_s / e.maxmin_s:.3f}, "
          f"paced {e.allreduce_s / e.paced_s:.3f}, busiest-NIC model {e.model_speedup:.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
