"""The fluid's latency counts every repetition of every step, with or without links.

``fluid_load`` sums ``repeat x latency`` over a job's steps; the engine's traffic never has a step
without links today, so this branch is checked on a hand-made traffic (a plant "latency counted once per
step" there passed every engine-level test).
"""

from __future__ import annotations

import numpy as np
import pytest

from commsched.scheduling.traffic import JobTraffic, StepLoad
from commsched.sim.fast.fluid import fluid_load, fluid_periods


def _step(links: list[int], *, repeat: int, latency_s: float) -> StepLoad:
    ids = np.array(links, dtype=np.int64)
    return StepLoad(
        links=ids,
        bytes_per_rep=np.ones(ids.size),
        max_flow_bytes=1.0,
        repeat=repeat,
        latency_s=latency_s,
        share=np.ones(ids.size),
    )


def test_every_repetition_pays_its_latency_on_steps_with_and_without_links() -> None:
    cap = np.array([1.0, 1.0])
    steps = (_step([], repeat=3, latency_s=0.01), _step([0], repeat=2, latency_s=0.02))
    tr = JobTraffic(steps=steps, link_ids=np.array([0], dtype=np.int64), link_bytes=np.array([2.0]))
    load = fluid_load(tr, cap)
    assert load.latency_s == pytest.approx(3 * 0.01 + 2 * 0.02, rel=1e-12)
    assert load.bw_time_s.tolist() == pytest.approx([0.0, 2.0])  # repeat x largest transfer / pace
    period = fluid_periods(
        loads=[load], compute_s=np.array([0.1]), overlap=np.array([1.0]), classes=np.array([0]),
        capacity_bytes_per_s=cap,
    )  # fmt: skip
    assert period is not None and float(period[0]) == pytest.approx(0.1 + 0.07 + 2.0, rel=1e-9)
