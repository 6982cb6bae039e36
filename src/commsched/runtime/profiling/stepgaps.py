"""The time a job's communication lasts beyond its bytes at its own pace, from a host's byte counters.

A host of a ring receives its share of every step at the pace of the wire, and between two steps it
waits for the program (gloo's reduction of the chunk, the interpreter, the next bucket): gaps of a few
milliseconds, shorter than the agent's 10 ms bins, that no bin shows as silent. They show as bins
with fewer bytes than the pace: over a window, the host's active time per iteration (bins that carry
bytes either way) minus its received bytes per iteration at its *pace* (the mean of its fullest
bins, those within :data:`FULL` of the 90th percentile) is the time its communication held none of
its links. On the testbed the pace came out at the links' TCP goodput (59.6-60.1 Mbit/s on 62.5 Mbit/s
uplinks, 59.77 in the model) and this excess at 26-37 ms per iteration for rings that nothing shared
a link with, which is what their twins were short of (docs/testbed-run.md). A job that shares a link
with another of its class (or above) waits there too, and that wait is the fluid model's own: its
excess is not a gap between steps, and :func:`commsched.experiments.testbed_run.command_report`
does not use it for such a job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["FULL", "step_gaps_s"]

#: a bin is full when it carries this share of the 90th percentile of the non-empty bins or more
FULL = 0.8


def step_gaps_s(traffic: Mapping[str, Any], *, start: float, end: float, period_s: float) -> float | None:
    """Seconds per iteration of ``period_s`` the host's communication lasted beyond its received
    bytes at its pace over ``[start, end]`` (``None`` with too little traffic).

    Examples
    --------
    Bins of 10 ms; every 0.5 s a burst of ten full bins and two half bins (a gap of 10 ms in all):

    >>> phase = np.round(np.arange(0, 5.0, 0.01) % 0.5, 6)
    >>> per_bin = np.where(phase < 0.1, 1e5, 0.0)
    >>> per_bin[(phase >= 0.1) & (phase < 0.12)] = 5e4
    >>> cum = np.cumsum(per_bin).tolist()  # the counter at the end of each bin
    >>> tr = {"t": (np.arange(1, 501) * 0.01).tolist(), "rx_data_bytes": cum, "data_bytes": cum,
    ...       "sample_s": 0.01}
    >>> round(step_gaps_s(tr, start=0.0, end=5.0, period_s=0.5), 3)
    0.01
    """
    sample = float(traffic["sample_s"])
    t = np.asarray(traffic["t"], dtype=float)
    if t.size < 2 or end - start < 4 * period_s:
        return None
    grid = np.arange(start, end + sample / 2, sample)
    rx = np.diff(np.interp(grid, t, np.asarray(traffic["rx_data_bytes"], dtype=float)))
    tx = np.diff(np.interp(grid, t, np.asarray(traffic["data_bytes"], dtype=float)))
    some = rx[rx > 0]
    if some.size < 10:
        return None
    full = rx[rx >= FULL * float(np.percentile(some, 90))]
    pace = float(full.mean())  # bytes per bin
    iterations = (end - start) / period_s
    active = float(np.count_nonzero((rx > 0) | (tx > 0))) * sample
    return max(0.0, (active - float(rx.sum()) / pace * sample) / iterations)
