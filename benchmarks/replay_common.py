"""Shared by the replay benchmarks: the trace scenarios, jittered draws, the cost per solve by size, memory.

- :func:`trace_scenario` and :func:`scale_scenario`: the Crux-scale trace and the production-scale shape
  ``bench_trace_replay.py`` replays (its notes), also used by ``fast_vs_exact_scale.py``.
- :func:`jittered`: a scenario with every arrival delayed by a uniform draw in ``[0, 1 ms)`` (generator
  seeded ``[seed, draw, *salt]``), far below anything the trace means: exact mode's own spread is how far
  it moves under that (``fast_vs_exact_scale.py``'s draws, ``bench_trace_replay.py --jitter-draw`` and
  the exact-mode noise of its ``--agreement``).
- :func:`solve_clock`: while open, every call of the compiled step change
  (``commsched.sim.rates.flowkernel.step_change``, which the engine looks up through its module at each call)
  is timed (this thread's CPU time around the call: wall time would count the time a loaded machine
  leaves the process waiting) and counted by the size of the component it was made for (the
  slots of its ``members``: one per job, two for a job whose data-parallel stream runs beside its
  blocking one) and by kind: a *miss* (entered with ``io[HIT]`` 0: the component is re-solved), a *hit*
  (entered with ``io[HIT]`` 1 and left so: the cached paces were set) or a *collision* (entered 1, left -1:
  the cached paces were not the configuration's, a miss follows). The engine itself is not changed: the
  module attribute is replaced while the clock is open and put back in ``finally``. Its own cost (the
  wrapper and two clock reads, about 1.5 us a call) lands in the CPU time of the run it wraps.
- :func:`peak_rss_mb`: the peak resident memory of this process (``RUSAGE_SELF``), MiB.
- :func:`measured_replay`: one replay in this process with the figures the replay benchmarks print.
"""

from __future__ import annotations

import inspect
import resource
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn

import numpy as np

from commsched.api.runner import simulate_scenario
from commsched.io import yamlio
from commsched.io.scenario import scenario_from_data
from commsched.io.schema import Scenario
from commsched.io.shipped import shipped_text
from commsched.sim.loop import compiled
from commsched.sim.rates import flowkernel
from commsched.sim.rates.flowlayout import HIT
from commsched.sim.results.records import SimConfig

DAY_S = 86_400.0
#: the production-scale shape: jobs per GPU over the 14-day trace, GPUs per ToR
SCALE_JOBS_PER_GPU = 40_000 / 16_384
GPUS_PER_TOR = 32
TRACE_DAYS = 14.0
JITTER_S = 1e-3
#: component sizes (slots) the solve costs are grouped by: (label, smallest, largest or None)
SIZE_BUCKETS: tuple[tuple[str, int, int | None], ...] = (
    ("1", 1, 1),
    ("2-4", 2, 4),
    ("5-9", 5, 9),
    ("10-29", 10, 29),
    ("30+", 30, None),
)
MISS, HIT_KIND, COLLISION = 0, 1, 2


def fail(where: str, what: str, expected: str) -> NoReturn:
    """Bad input: one line on stderr, exit status 2."""
    print(f"error: {where}: {what} (expected {expected})", file=sys.stderr)
    raise SystemExit(2)


def _shipped_data(name: str) -> dict[str, Any]:
    data = yamlio.load(shipped_text(name))
    assert isinstance(data, dict)  # a shipped scenario is a mapping
    return data


def trace_scenario(
    jobs: int, days: float, seed: int, placement: str = "pack", fluid_min_jobs: int | None = None
) -> Scenario:
    """``crux-fig23-clos`` with its trace stretched to ``jobs`` over ``days``, placed by ``placement``
    (``fluid_min_jobs``: the scenario key of that name, when given)."""
    data = _shipped_data("crux-fig23-clos")
    if fluid_min_jobs is not None:
        data["fluid_min_jobs"] = fluid_min_jobs
    data["trace"] = {**data["trace"], "jobs": jobs, "days": days, "seed": seed}
    data["placement"] = placement
    data["horizon_s"] = days * DAY_S
    data["name"] = f"crux-trace-{jobs}-{days:g}d"
    return scenario_from_data(data, source="bench_trace_replay")


def check_gpus(gpus: int, where: str = "--gpus") -> None:
    """A size of the production-scale shape is a positive multiple of a ToR's GPUs (else exit 2)."""
    if gpus < GPUS_PER_TOR or gpus % GPUS_PER_TOR:
        fail(where, f"{gpus}", f"a positive multiple of {GPUS_PER_TOR}: 4 hosts of 8 GPUs per ToR")


def scale_scenario(
    gpus: int, days: float, seed: int, policy: str, fluid_min_jobs: int | None = None
) -> Scenario:
    """The first ``days`` of the 14-day trace at ``gpus`` GPUs (``bench_trace_replay.py --gpus``)."""
    check_gpus(gpus)
    data = _shipped_data("crux-fig23-clos")
    data["topology"] = {**data["topology"], "tors": gpus // GPUS_PER_TOR}
    jobs = round(SCALE_JOBS_PER_GPU * gpus)
    data["trace"] = {**data["trace"], "jobs": jobs, "days": TRACE_DAYS, "seed": seed}
    data["placement"] = "first-fit"
    data["backfill"] = True
    data["policy"] = policy
    data["horizon_s"] = days * DAY_S
    if fluid_min_jobs is not None:
        data["fluid_min_jobs"] = fluid_min_jobs
    data["name"] = f"crux-trace-{gpus}gpu-first-{days:g}d"
    sc = scenario_from_data(data, source="bench_trace_replay --gpus")
    return replace(sc, jobs=tuple(j for j in sc.jobs if j.spec.arrival_s < days * DAY_S))


def jittered(sc: Scenario, seed: int, draw: int, salt: Sequence[int] = ()) -> Scenario:
    """``sc`` with every arrival delayed by up to 1 ms, drawn from ``default_rng([seed, draw, *salt])``.

    The delays are drawn job by job in the scenario's order, so the same ``(seed, draw)`` gives the same
    scenario in every benchmark that uses it.
    """
    rng = np.random.default_rng([seed, draw, *salt])
    jobs = tuple(
        replace(j, spec=replace(j.spec, arrival_s=j.spec.arrival_s + float(rng.uniform(0.0, JITTER_S))))
        for j in sc.jobs
    )
    return replace(sc, jobs=jobs)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, MiB (Linux reports ``ru_maxrss`` in KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


@dataclass(slots=True)
class SolveLog:
    """The step-change calls seen by :func:`solve_clock`: ``(slots, kind)`` -> ``[count, seconds]``."""

    acc: dict[tuple[int, int], list[float]] = field(default_factory=dict)

    def _sum(self, kind: int | None, lo: int = 0, hi: int | None = None) -> tuple[int, float]:
        n, s = 0.0, 0.0
        for (size, k), (c, t) in self.acc.items():
            if (kind is None or k == kind) and size >= lo and (hi is None or size <= hi):
                n, s = n + c, s + t
        return int(n), s

    @property
    def total_s(self) -> float:
        """Seconds in the step change, every kind of call."""
        return self._sum(None)[1]

    @property
    def calls(self) -> int:
        return self._sum(None)[0]

    @property
    def misses(self) -> int:
        return self._sum(MISS)[0]

    @property
    def hits(self) -> int:
        return self._sum(HIT_KIND)[0]

    def miss_us(self) -> float:
        """Microseconds per pace-cache miss (0 without a miss)."""
        n, s = self._sum(MISS)
        return s / n * 1e6 if n else 0.0

    def hit_us(self) -> float:
        """Microseconds per pace-cache hit (0 without a hit)."""
        n, s = self._sum(HIT_KIND)
        return s / n * 1e6 if n else 0.0

    def by_size(self) -> list[dict[str, Any]]:
        """Per size bucket: misses, hits and collisions (count and mean microseconds)."""
        rows = []
        for label, lo, hi in SIZE_BUCKETS:
            row: dict[str, Any] = {"slots": label}
            for name, kind in (("miss", MISS), ("hit", HIT_KIND), ("collision", COLLISION)):
                n, s = self._sum(kind, lo, hi)
                row[f"{name}_count"] = n
                row[f"{name}_us"] = round(s / n * 1e6, 2) if n else None
            rows.append(row)
        return rows


def _arg_index(fn: Callable[..., Any], name: str, default: int) -> int:
    """Position of parameter ``name`` of ``fn`` (a numba dispatcher's Python function), else ``default``."""
    try:
        params = list(inspect.signature(getattr(fn, "py_func", fn)).parameters)
    except (TypeError, ValueError):
        return default
    return params.index(name) if name in params else default


@contextmanager
def solve_clock(clock: Callable[[], float] = time.thread_time) -> Iterator[SolveLog]:
    """Time (by ``clock``) and count every call of the compiled step change while open (module notes)."""
    log = SolveLog()
    acc = log.acc
    real: Callable[..., None] = flowkernel.step_change
    mi, ii = _arg_index(real, "members", 3), _arg_index(real, "io", 4)
    perf = clock

    def timed(*args: Any) -> None:
        io = args[ii]
        entered_hit = io[HIT] > 0.0
        t = perf()
        real(*args)
        dt = perf() - t
        kind = (HIT_KIND if io[HIT] > 0.0 else COLLISION) if entered_hit else MISS
        key = (len(args[mi]), kind)
        c = acc.get(key)
        if c is None:
            acc[key] = [1.0, dt]
        else:
            c[0] += 1.0
            c[1] += dt

    setattr(flowkernel, "step_change", timed)  # noqa: B010 -- the engine resolves it through its module
    try:
        yield log
    finally:
        setattr(flowkernel, "step_change", real)  # noqa: B010


def measured_replay(
    sc: Scenario, policy: str, mode: str = "fast", *, solve_costs: bool = True, loop: str = "interpreted"
) -> dict[str, Any]:
    """Replay ``sc`` in this process: its figures, the CPU seconds of the replay alone (scenario built
    before, the compiled kernel loaded before: once per process, not a cost of the replay), this
    process's peak memory after it, and (``solve_costs``) the cost per solve by size; ``loop``: the
    event loop (``interpreted`` or ``compiled``, exact mode)."""
    flowkernel.warm_up()
    if loop == "compiled":  # each loop loads (or compiles) its own kernels only
        compiled.warm_up()
    c0 = time.process_time()
    if solve_costs:
        with solve_clock() as log:
            res = simulate_scenario(sc, policy=policy, mode=mode, loop=loop)
    else:
        res = simulate_scenario(sc, policy=policy, mode=mode, loop=loop)
    cpu_s = time.process_time() - c0
    fluid = (
        sc.fluid_min_jobs
        if sc.fluid_min_jobs is not None
        else SimConfig(horizon_s=sc.horizon_s).fluid_min_jobs
    )
    out: dict[str, Any] = {
        "wall_s": round(res.wall_time_s, 3),
        "cpu_s": round(cpu_s, 3),
        "peak_rss_mb": peak_rss_mb(),
        "gpu_utilization": res.gpu_utilization,
        "jobs_finished": sum(j.finished for j in res.jobs),
        "jobs": len(sc.jobs),
        "gpus": sc.topology.n_gpus,
        "events": res.events,
        "mode": mode,
        "loop": loop,
        "fluid_min_jobs": fluid,
        "extrapolated_job_fraction": res.extrapolated_job_fraction,
        "largest_component": res.largest_component,
        "largest_domain": res.largest_domain,
    }
    if solve_costs:
        out |= {
            "step_changes": log.calls,
            "step_change_s": round(log.total_s, 3),
            "miss_us": round(log.miss_us(), 2),
            "hit_us": round(log.hit_us(), 2),
            "solves_by_size": log.by_size(),
        }
    return out
