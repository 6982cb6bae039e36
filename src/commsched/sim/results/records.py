"""Inputs and outputs of a simulation run (typed frozen records)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import NDArray

from commsched.workload import JobId


class Mode(StrEnum):
    """``exact`` simulates every iteration; ``fast`` extrapolates periodic steady states."""

    EXACT = "exact"
    FAST = "fast"


class Loop(StrEnum):
    """``interpreted`` handles every event in Python (the reference); ``compiled`` handles the flat events
    of exact mode (compute ends, releases, step ends) in compiled code (:mod:`commsched.sim.loop.flatloop`),
    with the same results."""

    INTERPRETED = "interpreted"
    COMPILED = "compiled"


@dataclass(frozen=True, slots=True, kw_only=True)
class SimConfig:
    """How to run a simulation.

    Attributes
    ----------
    horizon_s
        Simulated time at which every job still running is stopped.
    mode
        ``exact`` or ``fast``.
    seed
        Seed of the simulation's own random generator (ECMP source ports and other draws).
    sample_s
        Spacing of the time series; ``None`` picks about 200 samples over the run.
    warmup_s
        Start of the window over which averages are taken (the time series always start at 0).
    fast_tolerance
        Largest phase mismatch (fraction of an iteration) accepted as "the same state" when the fast
        mode looks for a period before extrapolating.
    fast_rel_tolerance
        An approximate period is accepted at once when extrapolating it misstates no job's throughput
        by more than this fraction (phase mismatch over the iterations the job completes in the
        period); 0 disables it.
    fast_max_history
        Iterations of a component's anchor job kept to look for a period or a measured regime (twice
        this many); after this many without either, the anchor moves to the job that advanced least.
    fast_window_iterations
        A component without a period is extrapolated at its jobs' measured rates only once every job
        completed at least this many iterations in each of two consecutive windows.
    fast_rate_tolerance
        ... and the two windows' rates of every job agree within this fraction of its rate.
    fluid_min_jobs
        Fast mode: components of at least this many contending jobs run at their analytic fluid
        steady state (:mod:`commsched.sim.fast.fluid`) instead of step by step; 0 (the default) never. The
        fluid is cheaper but outside the fast mode's error bound on crowded components
        (``docs/simulator.md``).
    loop
        Which event loop runs the simulation (:class:`Loop`; ``compiled``: exact mode only).
    """

    horizon_s: float
    mode: Mode = Mode.EXACT
    seed: int = 0
    sample_s: float | None = None
    warmup_s: float = 0.0
    fast_tolerance: float = 1e-6
    fast_rel_tolerance: float = 1e-3
    fast_max_history: int = 24
    fast_window_iterations: int = 3
    fast_rate_tolerance: float = 0.02
    fluid_min_jobs: int = 0
    loop: Loop = Loop.INTERPRETED


@dataclass(frozen=True, slots=True, kw_only=True)
class JobResult:
    """What happened to one job.

    Examples
    --------
    >>> import commsched as cs
    >>> job = cs.simulate("crux-fig19", policy="crux-full", mode="fast").jobs[0]
    >>> (job.id, job.gpus, job.iterations > 0, job.slowdown >= 1.0 - 1e-9)
    ('gpt', 32, True, True)
    >>> job.finished  # crux-fig19's jobs train for the whole horizon
    False
    """

    id: JobId
    gpus: int
    arrival_s: float
    start_s: float | None
    end_s: float | None
    iterations: float
    target_iterations: float | None
    standalone_iteration_s: float
    mean_iteration_s: float
    busy_gpu_s: float
    finished: bool
    priority_class: int
    intensity: float
    #: shared a link (intra-host or network) with another running job at some time: Crux Fig. 6's
    #: "at risk of contention"
    shared_links: bool = False
    placement: tuple[str, ...] = ()
    #: bytes per iteration leaving a NIC onto the fabric, per group kind (tp, pp, dp, ep; NaN: unknown)
    fabric_bytes_per_iteration: tuple[tuple[str, float], ...] = ()
    #: its ideal iteration (:mod:`commsched.sim.results.ideal`): alone on the empty cluster, placed by its job
    #: scheduler, its flows on the least loaded of their paths; the same under every policy (NaN: unknown)
    ideal_iteration_s: float = float("nan")
    #: the model it trains (the zoo name, else its profile's name)
    model: str = ""

    @property
    def wait_s(self) -> float:
        return (self.start_s - self.arrival_s) if self.start_s is not None else float("nan")

    @property
    def jct_s(self) -> float:
        """Completion time: end - arrival (``nan`` while unfinished)."""
        return (self.end_s - self.arrival_s) if (self.end_s is not None and self.finished) else float("nan")

    @property
    def run_s(self) -> float:
        return (
            (self.end_s - self.start_s)
            if (self.end_s is not None and self.start_s is not None)
            else float("nan")
        )

    @property
    def reference_iteration_s(self) -> float:
        """What its slowdown is measured against: its ideal, or its standalone time where the ideal is
        unknown."""
        ideal = self.ideal_iteration_s
        return ideal if np.isfinite(ideal) and ideal > 0 else self.standalone_iteration_s

    @property
    def slowdown(self) -> float:
        """Mean iteration over the ideal (:attr:`reference_iteration_s`): the same reference under every
        policy, so that a policy's own collisions (ECMP's) count as slowdown."""
        ref = self.reference_iteration_s
        if ref <= 0 or not np.isfinite(self.mean_iteration_s):
            return float("nan")
        return self.mean_iteration_s / ref

    @property
    def standalone_slowdown(self) -> float:
        """Mean iteration over the standalone time on the policy's own routes (contention only)."""
        if self.standalone_iteration_s <= 0 or not np.isfinite(self.mean_iteration_s):
            return float("nan")
        return self.mean_iteration_s / self.standalone_iteration_s


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class TimeSeries:
    """Sampled series. ``t`` are the interval ends; every other array has one row per interval.

    Examples
    --------
    >>> import commsched as cs
    >>> s = cs.simulate("crux-fig19", policy="crux-full", mode="fast").series
    >>> s.link_utilization.shape == (len(s.t), len(s.link_ids))
    True
    """

    t: NDArray[np.float64]
    gpu_utilization: NDArray[np.float64]
    allocated_gpu_utilization: NDArray[np.float64]
    #: the links that carried traffic during the run (sorted ids); a link that never carried a byte has
    #: no column, so the series' size follows the traffic, not the fabric
    link_ids: NDArray[np.int64]
    link_utilization: NDArray[np.float64]  # intervals x link_ids
    link_intensity: NDArray[np.float64]  # intervals x link_ids, traffic-weighted GPU intensity (nan if idle)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class SimResult:
    """The outcome of one simulation.

    Examples
    --------
    >>> import commsched as cs
    >>> r = cs.simulate("crux-fig19", policy="crux-full", mode="fast")
    >>> (r.policy, str(r.mode), r.cluster_gpus, len(r.jobs))
    ('crux-full', 'fast', 96, 4)
    """

    policy: str
    mode: Mode
    seed: int
    cluster_gpus: int
    sim_time_s: float
    window_s: tuple[float, float]
    gpu_utilization: float
    allocated_gpu_utilization: float
    jobs: tuple[JobResult, ...]
    series: TimeSeries
    busy_gpu_s: float
    events: int
    link_bytes: NDArray[np.float64]
    link_intensity_bytes: NDArray[np.float64]
    wall_time_s: float = 0.0
    #: the most running jobs one contention domain held (jobs that can ever share a link; a decision
    #: costs what its domain holds)
    largest_domain: int = 0
    #: the most running jobs one component held (jobs sharing links under their routes)
    largest_component: int = 0
    #: fast mode: the share of the jobs' running time (job-seconds) that was extrapolated, not simulated
    extrapolated_job_fraction: float = 0.0
    #: fast mode: checks of stretches extrapolated at measured rates (by the detail after each), and how
    #: many found that the regime had not held (the stretch was then re-credited)
    fast_checks: int = 0
    fast_checks_failed: int = 0
    #: fast mode: the worst disagreement a check saw between a job's rate after a stretch and the rate
    #: the stretch credited it (relative)
    worst_check_disagreement: float = 0.0
