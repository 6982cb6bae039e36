"""Dynamic bandwidth (Mercury's multi-tenant case, §VI): the shaped rate changes during the run.

ByteScheduler keeps the partition and credit its auto-tuner found at the first level (a search over
both, each point measured by a short real run, as ByteScheduler's tuner measures step times); Mercury
has nothing to tune. Both run while the link cycles through ``levels`` every ``period_s`` seconds
(``tc class change``); the result is each transport's iteration-time series with start times.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

from commsched.runtime.ps.bench import JobRun, JobSpec, run_job
from commsched.runtime.ps.shaped_link import ShapedLink
from commsched.runtime.ps.transports import TransportConfig

MB = 1_000_000  # bytes
#: the tuner's grid: partition sizes (bytes) and credits (multiples of the partition)
PARTITIONS: tuple[int, ...] = (2 * MB, 4 * MB, 8 * MB)
CREDIT_FACTORS: tuple[int, ...] = (1, 2, 5)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tuned:
    """The tuner's pick and every point it measured: ``(partition, credit, median iteration s)``."""

    config: TransportConfig
    points: tuple[tuple[int, int, float], ...]


def tune_bytescheduler(link: ShapedLink, spec: JobSpec) -> Tuned:
    """Search partition x credit on the live link (one short job per point); keep the fastest."""
    probe = replace(spec, iterations=2, warmup=1)
    points = []
    for part, factor in itertools.product(PARTITIONS, CREDIT_FACTORS):
        cfg = TransportConfig(name="bytescheduler", partition_bytes=part, credit_bytes=part * factor)
        points.append((part, part * factor, run_job(link, cfg, probe).median_s))
    part, credit, _ = min(points, key=lambda p: p[2])
    return Tuned(config=TransportConfig(name="bytescheduler", partition_bytes=part, credit_bytes=credit),
                 points=tuple(points))  # fmt: skip


def _cycle(link: ShapedLink, levels_bps: Sequence[float], period_s: float, stop: threading.Event) -> None:
    order = [*levels_bps[1:], levels_bps[0]]
    for rate in itertools.cycle(order):
        if stop.wait(period_s):
            break
        link.set_rate(rate)
    link.set_rate(levels_bps[0])


def dynamic_runs(
    link: ShapedLink, configs: Sequence[TransportConfig], spec: JobSpec, *, levels_bps: Sequence[float],
    period_s: float,
) -> list[JobRun]:  # fmt: skip
    """Run each config while the link's rate cycles through ``levels_bps`` (first level at start)."""
    out = []
    for cfg in configs:
        link.set_rate(levels_bps[0])
        out.append(
            run_job(link, cfg, spec, during=lambda stop: _cycle(link, list(levels_bps), period_s, stop))
        )
    return out
