"""Per-link byte counters and utilisation time series, under the simulator's link ids (``links.csv``).

The load of directed link ``l`` is the transmitted bytes of its egress interface (see
:mod:`commsched.testbed.layout`), read from ``/proc/net/dev`` inside each namespace. Utilisation is
bits sent per second over the link's *scaled* capacity, so 1.0 means the emulated link is full,
whatever the rate scale. Intra-host links (NVLink, PCIe) are not emulated and have no series.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from commsched.testbed import netns
from commsched.testbed.layout import Layout
from commsched.topology import LinkId, Topology


def link_bytes(layout: Layout) -> dict[LinkId, int]:
    """Transmitted bytes (L2 frames) of every emulated directed link, now."""
    per_ns = {ns: netns.dev_counters(ns) for ns in layout.namespaces}
    return {lk: per_ns[ns][iface][1] for lk, (ns, iface) in layout.egress().items()}


def delta(after: Mapping[LinkId, int], before: Mapping[LinkId, int]) -> dict[LinkId, int]:
    """Bytes per link between two readings."""
    return {lk: after[lk] - before.get(lk, 0) for lk in after}


@dataclass(frozen=True, slots=True, kw_only=True)
class UtilisationSeries:
    """``util[i, k]``: utilisation of link ``link_ids[k]`` over ``(times_s[i], times_s[i + 1]]``."""

    link_ids: tuple[LinkId, ...]
    times_s: NDArray[np.float64]
    util: NDArray[np.float64]

    def of(self, link: int) -> NDArray[np.float64]:
        """The series of one link id."""
        return self.util[:, self.link_ids.index(LinkId(link))]

    def rows(self, topology: Topology) -> list[list[object]]:
        """Rows ``t_s, link, src, dst, kind, utilization`` (the simulator's ``links.csv`` columns up to
        ``utilization``), for links that carried traffic, ``t_s`` = the start of each interval."""
        used = [k for k in range(len(self.link_ids)) if self.util.size and float(self.util[:, k].sum()) > 0]
        out: list[list[object]] = []
        for i in range(self.util.shape[0]):
            for k in used:
                lk = topology.links[self.link_ids[k]]
                out.append(
                    [float(self.times_s[i]), int(lk.id), lk.src, lk.dst, str(lk.kind), float(self.util[i, k])]
                )
        return out


class CounterSampler:
    """Samples every emulated link's counters; :meth:`series` turns samples into utilisation.

    Parameters
    ----------
    layout
        The testbed's layout (:meth:`commsched.testbed.handle.Testbed.layout`).
    capacity_bps
        Scaled capacity of each directed link (bits/s), for the utilisation denominator.

    Examples
    --------
    A runtime samples while its jobs run::

        sampler = tb.sampler()
        for _ in range(100):
            sampler.sample()
            time.sleep(0.1)
        series = sampler.series()      # util[i, k] per link id, as in links.csv
    """

    def __init__(self, layout: Layout, capacity_bps: Mapping[LinkId, float]) -> None:
        self.layout = layout
        self.link_ids = tuple(sorted(layout.egress()))
        self.capacity_bps = np.array([capacity_bps[lk] for lk in self.link_ids], dtype=float)
        self._times: list[float] = []
        self._bytes: list[list[int]] = []

    def sample(self) -> None:
        """Take one reading of every link (monotonic time)."""
        now = time.monotonic()
        counts = link_bytes(self.layout)
        self._times.append(now)
        self._bytes.append([counts[lk] for lk in self.link_ids])

    def series(self) -> UtilisationSeries:
        """Utilisation between consecutive samples (bits per second over scaled capacity)."""
        t = np.array(self._times, dtype=float)
        b = np.array(self._bytes, dtype=float).reshape(len(self._times), len(self.link_ids))
        if len(t) < 2:
            return UtilisationSeries(
                link_ids=self.link_ids,
                times_s=t - (t[0] if len(t) else 0.0),
                util=np.zeros((0, len(self.link_ids))),
            )
        dt = np.diff(t)[:, None]
        bits = np.diff(b, axis=0) * 8.0  # bytes -> bits
        return UtilisationSeries(
            link_ids=self.link_ids, times_s=t - t[0], util=bits / dt / self.capacity_bps[None, :]
        )
