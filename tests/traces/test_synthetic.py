"""The Crux-calibrated synthetic trace meets the trace facts (reference/crux-spec.md A19, §6.5)."""

from __future__ import annotations

import pytest

from commsched.errors import InputError
from commsched.workload.traces import SyntheticParams, synthetic_trace, to_job_specs, trace_stats


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_trace_matches_crux_statistics(seed: int) -> None:
    t = synthetic_trace(SyntheticParams(seed=seed))
    s = trace_stats(t)
    assert s.jobs == 5000
    assert max(j.arrival_s for j in t.jobs) <= 14 * 86_400
    assert s.share_ge128 > 0.10  # Fig. 4: > 10 % of jobs on >= 128 GPUs
    assert s.max_gpus == 512  # largest job 512 GPUs
    assert s.peak_jobs > 30 and s.gpus_at_peak_jobs > 1000  # Fig. 5
    assert 0.28 <= s.share_at_risk <= 0.42  # Fig. 6: 36.3 % at risk (placement-free proxy)
    assert s.offered_gpu_s / (2048 * 14 * 86_400) == pytest.approx(0.5, rel=0.02)


def test_sizes_are_whole_hosts_and_models_follow_size() -> None:
    t = synthetic_trace(SyntheticParams(jobs=2000, seed=5))
    assert all(j.gpus in (1, 2, 4) or j.gpus % 8 == 0 for j in t.jobs)
    assert {j.model for j in t.jobs if j.gpus >= 128} == {"gpt3-crux"}
    specs = to_job_specs(t)
    assert len(specs) == 2000 and all(s.duration_s and s.duration_s >= 60 for s in specs)


def test_reproducible_and_seed_sensitive() -> None:
    p = SyntheticParams(jobs=300, days=2.0, seed=7)
    assert synthetic_trace(p) == synthetic_trace(p)
    assert synthetic_trace(p) != synthetic_trace(SyntheticParams(jobs=300, days=2.0, seed=8))


def test_small_cluster_drops_big_sizes() -> None:
    t = synthetic_trace(SyntheticParams(jobs=500, cluster_gpus=64, seed=1))
    assert max(j.gpus for j in t.jobs) <= 64


@pytest.mark.parametrize(
    "params",
    [
        SyntheticParams(jobs=0),
        SyntheticParams(days=0.0),
        SyntheticParams(cluster_gpus=0),
        SyntheticParams(load=0.0),
    ],
)
def test_bad_parameters(params: SyntheticParams) -> None:
    with pytest.raises(InputError):
        synthetic_trace(params)


def test_stats_sweep_on_a_hand_case() -> None:
    from commsched.workload.traces import Trace, TraceJob

    jobs = (
        TraceJob(id="a", arrival_s=0.0, duration_s=10.0, gpus=16, model="bert"),
        TraceJob(id="b", arrival_s=10.0, duration_s=5.0, gpus=32, model="bert"),  # starts as a ends
        TraceJob(id="c", arrival_s=12.0, duration_s=1.0, gpus=4, model="bert"),
    )
    s = trace_stats(Trace(name="h", source="test", jobs=jobs))
    assert (s.peak_jobs, s.peak_gpus, s.gpus_at_peak_jobs) == (2, 36, 36)
    assert s.share_at_risk == 0.0  # a and b do not overlap; c is single-host
    assert trace_stats(Trace(name="e", source="test", jobs=())).jobs == 0
