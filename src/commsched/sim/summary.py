"""Turn a finished ``Simulation`` into a ``SimResult`` (averages over the measurement window)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from commsched.sim.records import SimResult

if TYPE_CHECKING:
    from commsched.sim.engine import Simulation


def summarise(sim: Simulation, end: float) -> SimResult:
    """Averages over ``[warmup_s, end]``; per-job results; time series."""
    samples = sim.sampler.samples
    w0 = min(sim.config.warmup_s, end)
    first = samples[0]
    for s in samples:
        if s.t <= w0 + 1e-12:
            first = s
        else:
            break
    last = samples[-1]
    span = last.t - first.t
    busy = last.busy_gpu_s - first.busy_gpu_s
    alloc = last.alloc_gpu_s - first.alloc_gpu_s
    util = busy / (sim.cluster_gpus * span) if span > 0 and sim.cluster_gpus > 0 else 0.0
    a_util = busy / alloc if alloc > 0 else 0.0
    return SimResult(
        policy=sim.policy_name,
        mode=sim.config.mode,
        seed=sim.config.seed,
        cluster_gpus=sim.cluster_gpus,
        sim_time_s=end,
        window_s=(first.t, last.t),
        gpu_utilization=util,
        allocated_gpu_utilization=a_util,
        jobs=sim.job_results(end),
        series=sim.series(),
        busy_gpu_s=last.busy_gpu_s,
        events=sim.events,
        link_bytes=last.link_bytes,
        link_intensity_bytes=last.link_iw_bytes,
    )
