"""Dynamic bandwidth (Mercury's multi-tenant case, §VI): the shaped rate changes during the run.

ByteScheduler keeps the partition and credit its auto-tuner found at the first level (a search over
both, each point measured by a short real run, as ByteScheduler's tuner measures step times); Mercury
has nothing to tune. Both run while the link cycles through ``levels`` every ``period_s`` seconds
(``tc class change``); the result is each transport's iteration-time series with start times.
:func:`dynamic_comparison` adds the static run at the first level and the two gaps the acceptance
compares: Mercury's advantage ``mean(ByteScheduler) / mean(Mercury) - 1`` (the paper's "by up to
104 %") under the changing rate and at the fixed first level.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from commsched.experiments.ps.bench import JobRun, JobSpec, run_job
from commsched.runtime.ps.transports import TransportConfig
from commsched.testbed.shaped_link import ShapedLink

MB = 1_000_000  # bytes
#: the tuner's grid: partition sizes (bytes) and credits (multiples of the partition)
PARTITIONS: tuple[int, ...] = (2 * MB, 4 * MB, 8 * MB)
CREDIT_FACTORS: tuple[int, ...] = (1, 2, 5)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tuned:
    """The tuner's pick and every point it measured: ``(partition, credit, median iteration s)``."""

    config: TransportConfig
    points: tuple[tuple[int, int, float], ...]


def tune_bytescheduler(
    link: ShapedLink, spec: JobSpec, *, partitions: Sequence[int] = PARTITIONS,
    credit_factors: Sequence[int] = CREDIT_FACTORS,
) -> Tuned:  # fmt: skip
    """Search partition x credit on the live link (one short job per point); keep the fastest."""
    probe = replace(spec, iterations=2, warmup=1)
    points = []
    for part, factor in itertools.product(partitions, credit_factors):
        cfg = TransportConfig(name="bytescheduler", partition_bytes=part, credit_bytes=part * factor)
        points.append((part, part * factor, run_job(link, cfg, probe).median_s))
    part, credit, _ = min(points, key=lambda p: p[2])
    return Tuned(config=TransportConfig(name="bytescheduler", partition_bytes=part, credit_bytes=credit),
                 points=tuple(points))  # fmt: skip


#: one rate change: (``time.perf_counter()`` when it took effect, rate bits/s)
Change = tuple[float, float]


def _cycle(
    link: ShapedLink, levels_bps: Sequence[float], period_s: float, stop: threading.Event,
    changes: list[Change],
) -> None:  # fmt: skip
    order = [*levels_bps[1:], levels_bps[0]]
    for rate in itertools.cycle(order):
        if stop.wait(period_s):
            break
        link.set_rate(rate)
        changes.append((time.perf_counter(), rate))
    link.set_rate(levels_bps[0])


@dataclass(frozen=True, slots=True, kw_only=True)
class DynamicRun:
    """A run under the changing rate and its rate schedule (the first entry: the first level)."""

    run: JobRun
    changes: tuple[Change, ...]

    def levels(self) -> tuple[float, ...]:
        """The rate in effect at the middle of each measured iteration."""
        out = []
        for start, dur in zip(self.run.started_s, self.run.iteration_s, strict=True):
            t = self.run.origin_s + start + dur / 2
            out.append(next((r for at, r in reversed(self.changes) if at <= t), self.changes[0][1]))
        return tuple(out)

    def per_level_mean_s(self) -> dict[float, float]:
        """Mean iteration time per rate level (iterations placed by their middle)."""
        by: dict[float, list[float]] = {}
        for rate, it in zip(self.levels(), self.run.iteration_s, strict=True):
            by.setdefault(rate, []).append(it)
        return {rate: sum(xs) / len(xs) for rate, xs in sorted(by.items(), reverse=True)}

    def balanced_mean_s(self, levels: Sequence[float] | None = None) -> float:
        """Mean of the per-level means (of ``levels``, default all seen): each level weighs the same."""
        means = self.per_level_mean_s()
        keys = list(means) if levels is None else list(levels)
        return sum(means[k] for k in keys) / len(keys) if keys else float("nan")


def dynamic_runs(
    link: ShapedLink, configs: Sequence[TransportConfig], spec: JobSpec, *, levels_bps: Sequence[float],
    period_s: float,
) -> list[DynamicRun]:  # fmt: skip
    """Run each config while the link's rate cycles through ``levels_bps`` (first level at start)."""
    out = []
    for cfg in configs:
        link.set_rate(levels_bps[0])
        changes: list[Change] = [(time.perf_counter(), levels_bps[0])]
        cycle = functools.partial(_cycle, link, list(levels_bps), period_s, changes=changes)
        run = run_job(link, cfg, spec, during=cycle)
        out.append(DynamicRun(run=run, changes=tuple(changes)))
    return out


def mean_s(run: JobRun) -> float:
    """Mean iteration time of a run, seconds."""
    return sum(run.iteration_s) / len(run.iteration_s)


def mercury_gap(bytescheduler: JobRun, mercury: JobRun) -> float:
    """Mercury's advantage ``mean(ByteScheduler) / mean(Mercury) - 1`` (positive: Mercury faster).

    Examples
    --------
    >>> b = JobRun(transport="bytescheduler", iteration_s=(2.0, 4.0), started_s=(0, 2), max_abs_error=0)
    >>> m = JobRun(transport="mercury", iteration_s=(1.5, 1.5), started_s=(0, 1.5), max_abs_error=0)
    >>> mercury_gap(b, m)
    1.0
    """
    return mean_s(bytescheduler) / mean_s(mercury) - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class DynamicComparison:
    """Tuned ByteScheduler against Mercury, static at the first level and under the changing rate."""

    tuned: Tuned
    static: tuple[JobRun, JobRun] = field(repr=False)  # (bytescheduler, mercury) at the first level
    dynamic: tuple[DynamicRun, DynamicRun] = field(repr=False)  # (bytescheduler, mercury), rate cycling

    @property
    def static_gap(self) -> float:
        return mercury_gap(*self.static)

    @property
    def dynamic_gap(self) -> float:
        """Mercury's advantage in plain mean iteration time under the changing rate."""
        return mercury_gap(self.dynamic[0].run, self.dynamic[1].run)

    @property
    def common_levels(self) -> tuple[float, ...]:
        """The rate levels both dynamic runs have iterations in."""
        a, b = (set(d.per_level_mean_s()) for d in self.dynamic)
        return tuple(sorted(a & b, reverse=True))

    @property
    def balanced_gap(self) -> float:
        """Mercury's advantage in level-balanced means over the common levels (phase removed)."""
        levels = self.common_levels
        if not levels:
            return float("nan")
        return self.dynamic[0].balanced_mean_s(levels) / self.dynamic[1].balanced_mean_s(levels) - 1

    @property
    def holds(self) -> bool:
        """The acceptance: Mercury faster under the changing rate, by more than at the first level.

        Judged on the level-balanced means: the plain means also depend on how many iterations of
        each run happened to fall into the slow level.
        """
        return self.balanced_gap > 0 and self.balanced_gap > self.static_gap


def dynamic_comparison(
    link: ShapedLink, spec: JobSpec, *, levels_bps: Sequence[float], period_s: float,
    mercury: TransportConfig | None = None, partitions: Sequence[int] = PARTITIONS,
    credit_factors: Sequence[int] = CREDIT_FACTORS,
) -> DynamicComparison:  # fmt: skip
    """Tune ByteScheduler at the first level, run both there (static), then both with the rate cycling."""
    link.set_rate(levels_bps[0])
    tuned = tune_bytescheduler(link, spec, partitions=partitions, credit_factors=credit_factors)
    configs = [tuned.config, mercury or TransportConfig(name="mercury")]
    static = [run_job(link, cfg, spec) for cfg in configs]
    dyn = dynamic_runs(link, configs, spec, levels_bps=levels_bps, period_s=period_s)
    return DynamicComparison(tuned=tuned, static=(static[0], static[1]), dynamic=(dyn[0], dyn[1]))
