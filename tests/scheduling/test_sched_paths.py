"""The greedy path choice (crux-spec §2.2): least bottleneck, then least total, then lowest index."""

from __future__ import annotations

import numpy as np

from commsched.scheduling.paths import _best


def test_the_least_bottleneck_wins_over_a_smaller_total() -> None:
    # rows are candidate paths, columns their links' congestion after placing the flow
    scores = np.array([[0.5, 0.5, 0.5], [0.9, 0.0, 0.0]])
    assert _best(scores) == 0  # max 0.5 < 0.9, although its sum 1.5 > 0.9


def test_equal_bottlenecks_go_to_the_smaller_total_then_the_lower_index() -> None:
    assert _best(np.array([[0.7, 0.6], [0.7, 0.1], [0.7, 0.1]])) == 1
    assert _best(np.array([[0.2, 0.2], [0.2, 0.2]])) == 0
