"""Fast mode across arrivals: a component jumps ahead of the clock and is caught up only when touched.

Jobs ``a`` and ``b`` contend on the ToR0/ToR1 uplinks and settle into a periodic regime that fast mode
repeats. ``far`` arrives later on ToR2/ToR3 (links of its own): the decision leaves ``a``/``b``
untouched, so their jump goes on across the arrival. ``near`` arrives later still on ToR0/ToR1 and joins
their component: they must be brought back to the clock and resimulated up to the arrival, so that the
three contend from the right state. Fast mode must agree with exact mode on every job.
"""

from __future__ import annotations

from commsched.sim.engine import Simulation
from commsched.sim.results.records import Mode

from .helpers import job, simulation
from .scenarios import small_clos

TOPO = small_clos()


def _gpus(hosts: list[int], per_host: int = 8) -> list[str]:
    return [f"h{h}/gpu{g}" for h in hosts for g in range(per_host)]


def _jobs():  # type: ignore[no-untyped-def]
    return [
        job(
            "a", compute_s=0.2, comm_bytes=1.0e9, gpus=16, overlap=0.5, iterations=3000, gpu_ids=_gpus([0, 4])
        ),
        job(
            "b", compute_s=0.3, comm_bytes=1.5e9, gpus=16, overlap=1.0, iterations=2000, gpu_ids=_gpus([1, 5])
        ),
        job(
            "far",
            compute_s=0.25,
            comm_bytes=0.8e9,
            gpus=16,
            iterations=400,
            arrival_s=120.0,
            gpu_ids=_gpus([8, 12]),
        ),
        job(
            "near",
            compute_s=0.15,
            comm_bytes=1.2e9,
            gpus=16,
            iterations=800,
            arrival_s=400.0,
            gpu_ids=_gpus([2, 6]),
        ),
    ]


def _run(mode: Mode) -> tuple[Simulation, object]:
    sim = simulation(TOPO, _jobs(), horizon_s=1e5, mode=mode)
    return sim, sim.run()


def test_fast_mode_agrees_with_exact_across_arrivals() -> None:
    _, exact = _run(Mode.EXACT)
    sim, fast = _run(Mode.FAST)
    assert all(j.finished for j in exact.jobs) and all(j.finished for j in fast.jobs)
    for f, e in zip(fast.jobs, exact.jobs, strict=True):
        assert f.id == e.id
        assert abs(f.jct_s - e.jct_s) / e.jct_s < 0.01, (f.id, f.jct_s, e.jct_s)
        assert f.iterations == e.iterations
    assert abs(fast.gpu_utilization - exact.gpu_utilization) < 0.005
    assert fast.events < exact.events / 5
    # `near` joins the a/b component while it is ahead of the clock: it is caught up (at least once)
    assert sim.fast_catch_ups >= 1


def test_untouched_component_is_not_caught_up() -> None:
    """Without `near`, no decision touches a/b: the arrival of `far` never brings them back."""
    jobs = [j for j in _jobs() if j.spec.id != "near"]
    sim = simulation(TOPO, jobs, horizon_s=1e5, mode=Mode.FAST)
    res = sim.run()
    assert all(j.finished for j in res.jobs)
    assert sim.fast_catch_ups == 0


def test_starved_job_becomes_the_anchor() -> None:
    """A low-priority job slowed ~60x: the anchor moves to it, and fast mode still finds its period.

    ``hi`` (class 0) holds the link except during its 0.05 s of compute, so ``lo`` (class 1) moves its
    3 GB only in those windows: one ``lo`` iteration spans ~60 of ``hi``'s, more than a full history of
    ``hi`` iteration starts, so no period can be found at them.
    """
    from commsched.topology.builders import single_link

    from .helpers import run

    topo = single_link(capacity_bps=8e9)
    jobs = [
        job("hi", compute_s=0.05, comm_bytes=5e9, gpus=8, priority=0, iterations=4000),
        job("lo", compute_s=0.05, comm_bytes=3e9, gpus=8, priority=1, iterations=40),
    ]
    exact = run(topo, jobs, horizon_s=1e6, mode=Mode.EXACT)
    fast = run(topo, jobs, horizon_s=1e6, mode=Mode.FAST)
    assert all(j.finished for j in fast.jobs)
    for f, e in zip(fast.jobs, exact.jobs, strict=True):
        assert abs(f.jct_s - e.jct_s) / e.jct_s < 0.01, (f.id, f.jct_s, e.jct_s)
    assert fast.events < exact.events / 5
