"""Derived metrics of a simulation: Theorem-1 accounting, per-link summaries.

References
----------
Crux (SIGCOMM'24) §3, Theorem 1 and Appendix A; crux-spec §1.4.
"""

from __future__ import annotations

from dataclasses import dataclass

from commsched.sim.results.records import SimResult
from commsched.topology import LinkId, Topology


@dataclass(frozen=True, slots=True, kw_only=True)
class Theorem1:
    """``F_T`` (intensity-weighted busy time of a link) against ``U_T`` (GPU work done), in GPU-seconds."""

    f_t: float
    u_t: float

    @property
    def ratio(self) -> float:
        return self.f_t / self.u_t if self.u_t > 0 else float("nan")


def theorem1(result: SimResult, topology: Topology, link: LinkId | int) -> Theorem1:
    """Crux Theorem 1 on one link over the whole run.

    ``F_T = sum_j I_j S_j`` where ``S_j`` is the time the link carries job ``j`` at full rate
    (bytes on the link * 8 / capacity) and ``I_j = W_j / t_j`` with ``W_j`` in GPU-seconds per iteration.
    ``U_T`` is the busy GPU-seconds of the jobs. Over a long horizon ``F_T / U_T -> 1`` when all jobs
    contend on this link only (the theorem's setting).

    The simulator accumulates ``sum_j I_j * bytes_j`` per link, so ``F_T`` is that divided by the
    link's capacity in bytes/s (bits/s / 8).
    """
    cap_bytes_per_s = float(topology.capacity_bps[link]) / 8.0  # bits/s -> bytes/s
    f_t = float(result.link_intensity_bytes[link]) / cap_bytes_per_s
    return Theorem1(f_t=f_t, u_t=result.busy_gpu_s)
