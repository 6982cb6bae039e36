"""The compiled core of the exact engine against the reference max-min solver, on random problems.

Random components (jobs whose steps load random links with random shares, several classes, random
capacities) go through random sequences of step starts and ends; after each one the paces the kernel
keeps (re-solved on the arrays, or served from the pace cache for a recurring configuration) must be
the paces :func:`commsched.sim.reference.maxmin.max_min_rates_coo` computes from scratch over the steps in
flight, bit for bit (the exact engine's results depend on it: crowded components are chaotic). The bytes
flushed to the link counters must be each finished step's bytes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from commsched.scheduling.traffic import JobTraffic, StepLoad
from commsched.sim.rates import flowkernel as fk
from commsched.sim.rates import flowlayout as fl
from commsched.sim.rates.trafficpool import TrafficPool
from commsched.sim.reference.maxmin import max_min_rates_coo

N_LINKS = 12


def _traffic(rng: np.random.Generator, links_pool: np.ndarray) -> JobTraffic:
    steps = []
    for _ in range(int(rng.integers(1, 4))):
        links = np.sort(rng.choice(links_pool, size=int(rng.integers(1, 5)), replace=False)).astype(np.int64)
        bpr = rng.choice([1.0, 2.0, 3.0], size=links.size) * 1e6
        steps.append(
            StepLoad(
                links=links,
                bytes_per_rep=bpr,
                max_flow_bytes=1e6,
                repeat=int(rng.integers(1, 3)),
                latency_s=0.0,
                share=bpr / 1e6,
            )
        )
    ids = np.unique(np.concatenate([s.links for s in steps]))
    return JobTraffic(steps=tuple(steps), link_ids=ids, link_bytes=np.zeros(ids.size))


class _World:
    """A component of jobs on the kernel's arrays, driven the way ``Pacing`` drives it."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.n = int(rng.integers(2, 7))
        self.cap = rng.choice([1.0, 2.0, 5.0, 10.0], size=N_LINKS) * 1e6
        self.lf = np.zeros((N_LINKS, fl.LINK_ROWS))
        self.lf[:, fl.CAP] = self.cap
        self.sf = np.zeros((self.n, fl.SLOT_FIELDS))
        self.sf[:, fl.END] = math.inf
        self.sf[:, fl.CLS] = rng.integers(0, 3, size=self.n)
        self.pool = TrafficPool()
        self.traffic = [_traffic(rng, np.arange(N_LINKS)) for _ in range(self.n)]
        self.members = np.arange(self.n, dtype=np.int64)
        self.io = np.zeros(fl.IO_SIZE)
        self.snap = np.zeros((fl.SNAP_ROWS, self.n))
        self.step = [-1] * self.n
        self.cache: dict[tuple[tuple[int, int], ...], np.ndarray] = {}
        self.now = 0.0

    def change(self, j: int) -> None:
        """Job ``j`` starts its next step (or ends its last one) now."""
        tr = self.traffic[j]
        nxt = self.step[j] + 1
        self.step[j] = nxt if nxt < len(tr.steps) else -1
        row = self.pool.row(tr, self.step[j], lambda: {}) if self.step[j] >= 0 else -1
        key = tuple((i, self.step[i]) for i in range(self.n) if self.step[i] >= 0)
        io = self.io
        io[fl.NOW], io[fl.SLOT], io[fl.NEWROW] = self.now, j, row
        known = self.cache.get(key)
        if known is not None:
            io[fl.HIT] = 1.0
            fk.step_change(self.sf, self.pool.pf, self.pool.bf, self.lf, self.members, io, known)
            assert io[fl.HIT] == 1.0  # the configuration is the one cached
        else:
            io[fl.HIT] = 0.0
            fk.step_change(self.sf, self.pool.pf, self.pool.bf, self.lf, self.members, io, self.snap)
            self.cache[key] = self.snap[:, : int(io[fl.OUT_COUNT])].copy()

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        act = [i for i in range(self.n) if self.step[i] >= 0]
        rows, cols, vals = [], [], []
        for g, i in enumerate(act):
            s = self.traffic[i].steps[self.step[i]]
            rows += [g] * s.links.size
            cols += s.links.tolist()
            vals += s.share.tolist()
        paces = max_min_rates_coo(
            rows=np.array(rows, dtype=np.int64),
            cols=np.array(cols, dtype=np.int64),
            vals=np.array(vals, dtype=float),
            n_groups=len(act),
            capacity=self.cap,
            classes=self.sf[act, fl.CLS].astype(np.int64),
        )
        return np.array(act, dtype=np.int64), paces


@pytest.mark.parametrize("seed", range(40))
def test_kernel_paces_are_the_reference_max_min_paces(seed: int) -> None:
    w = _World(seed)
    for k in range(60):
        w.now = 0.01 * (k + 1)
        w.change(int(w.rng.integers(w.n)))
        act, want = w.reference()
        got = w.sf[act, fl.PACE]
        assert got.tolist() == want.tolist(), k
        assert all(w.sf[i, fl.ACTIVE] == (w.step[i] >= 0) for i in range(w.n))


def test_kernel_picks_the_earliest_end_and_flushes_whole_steps() -> None:
    w = _World(3)
    for j in range(w.n):
        w.change(j)
    ends = {j: w.sf[j, fl.END] for j in range(w.n)}
    assert w.io[fl.OUT_END] == min(ends.values())
    first = int(w.io[fl.OUT_SLOT])
    assert ends[first] == w.io[fl.OUT_END]
    step = w.traffic[first].steps[w.step[first]]
    w.now = float(w.io[fl.OUT_END])
    before = w.lf[:, fl.BYTES].copy()
    w.change(first)  # its step ends at its end: exactly its bytes reach its links
    moved = w.lf[:, fl.BYTES] - before
    expect = np.zeros(N_LINKS)
    expect[step.links] = step.bytes_per_rep * step.repeat
    assert np.allclose(moved, expect, rtol=1e-12, atol=1e-3)


def test_warm_up_shares_one_link_evenly() -> None:
    assert fk.warm_up() == [0.5, 0.5]
