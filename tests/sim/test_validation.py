"""The lockstep coupling rule against a chunk-by-chunk ring simulation (reported in docs/simulator.md)."""

from __future__ import annotations

import numpy as np
import pytest

from commsched.sim.reference.validation import ring_chunk_duration, ring_lockstep_duration


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("kind", ["uniform", "one-slow", "random"])
@pytest.mark.parametrize("slices", [1, 8])
def test_lockstep_matches_chunk_by_chunk(n: int, kind: str, slices: int) -> None:
    rng = np.random.default_rng(n)
    bw = np.full(n, 1e9)
    if kind == "one-slow":
        bw[n // 2] = 0.5e9
    elif kind == "random":
        bw = rng.uniform(0.5e9, 1e9, n)
    ref = ring_chunk_duration(bw, 1e9, 1e-5, slices=slices)
    assert ring_lockstep_duration(bw, 1e9, 1e-5) == pytest.approx(ref, rel=1e-9)
