"""The one place that defines how the testbed scales a cluster down to one machine.

Every link rate is multiplied by one factor ``rate_scale`` (e.g. 200 Gb/s x 1/400 = 500 Mbit/s).
Computation is not scaled, so **every byte count of a workload (bytes synchronised per iteration,
tensor sizes, transfer sizes) must be multiplied by the same factor**: then each transfer takes as
long on the testbed as on the real cluster, and the ratio of computation to communication, which
is what Crux's GPU intensity and every scheduling decision depend on, is kept. Runtimes that drive
real jobs on a testbed call :func:`scale_bytes` (or :meth:`Testbed.scale_bytes`) for every size.
"""

from __future__ import annotations

from commsched.errors import InputError
from commsched.topology import Topology
from commsched.topology.records import NETWORK_LINK_KINDS

#: the fastest emulated link gets this rate by default: shapes within a few per cent here
DEFAULT_TOP_RATE_BPS = 5e8


def default_rate_scale(topo: Topology) -> float:
    """The scale that gives the fastest network link :data:`DEFAULT_TOP_RATE_BPS` (at most 1).

    Examples
    --------
    >>> from commsched.topology import crux_testbed
    >>> default_rate_scale(crux_testbed())  # 200 Gb/s NICs -> 500 Mbit/s
    0.0025
    """
    caps = [lk.capacity_bps for lk in topo.links if lk.kind in NETWORK_LINK_KINDS]
    if not caps:
        raise InputError(f"topology {topo.name!r} has no network link", where="topology")
    return min(1.0, DEFAULT_TOP_RATE_BPS / max(caps))


def scale_bytes(size_bytes: float, rate_scale: float) -> int:
    """A workload's byte count on a testbed whose rates are scaled by ``rate_scale`` (rounded, >= 1).

    Examples
    --------
    >>> scale_bytes(100e6, 1 / 400)  # a 100 MB gradient on a 1/400 testbed
    250000
    """
    if not 0 < rate_scale <= 1:
        raise InputError(f"rate scale {rate_scale}", where="rate_scale", expected="a number in (0, 1]")
    return max(1, round(size_bytes * rate_scale))
