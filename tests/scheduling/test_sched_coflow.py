"""Coflow orderings of the baselines: Sincronia BSSI and Varys SEBF (crux-spec §8.2)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.errors import InputError
from commsched.scheduling.coflow import big_switch_loads, sincronia_order, varys_order


def weighted_completion(order: tuple[int, ...], sizes: np.ndarray, weights: np.ndarray) -> float:
    finish = np.cumsum(sizes[list(order)])
    return float((weights[list(order)] * finish).sum())


def test_single_port_unit_weights_is_shortest_first() -> None:
    sizes = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert sincronia_order([[s] for s in sizes]) == (1, 3, 4, 2, 0)
    assert varys_order([[s] for s in sizes]) == (1, 3, 4, 2, 0)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 20), st.integers(1, 5)), min_size=1, max_size=6))
def test_single_port_weighted_is_optimal(jobs: list[tuple[int, int]]) -> None:
    # on one port BSSI is Smith's rule, which minimises the weighted sum of completion times
    sizes = np.array([j[0] for j in jobs], dtype=float)
    weights = np.array([j[1] for j in jobs], dtype=float)
    order = sincronia_order(sizes[:, None], weights=weights)
    best = min(weighted_completion(p, sizes, weights) for p in itertools.permutations(range(len(jobs))))
    assert weighted_completion(order, sizes, weights) == pytest.approx(best)


def test_weights_scale_the_choice() -> None:
    loads = [[3.0], [1.0]]
    assert sincronia_order(loads) == (1, 0)
    assert sincronia_order(loads, weights=[4.0, 1.0]) == (0, 1)  # 4/3 > 1/1
    assert sincronia_order(loads, weights=[2.0, 1.0]) == (1, 0)  # 2/3 < 1/1


def test_two_port_hand_case() -> None:
    # ports 0 and 1; A: 4 on port 0; B: 3 on port 1; C: 2 on both.
    loads = np.array([[4.0, 0.0], [0.0, 3.0], [2.0, 2.0]])
    # BSSI: bottleneck port 0 (load 6): ratios A 1/4, C 1/2 -> A last; C's weight 1 - 1/4*2 = 1/2.
    # then bottleneck port 1 (load 5): B 1/3, C (1/2)/2 = 1/4 -> C last; B first.
    assert sincronia_order(loads) == (1, 2, 0)
    # SEBF: Gamma = 4, 3, 2 -> C, B, A
    assert varys_order(loads) == (2, 1, 0)
    # port rates turn bytes into time: port 1 twice as fast -> Gamma = 4, 1.5, 2
    assert varys_order(loads, port_rates=[1.0, 2.0]) == (1, 2, 0)


def test_ties_and_empty_coflows() -> None:
    assert sincronia_order([[1.0], [1.0], [1.0]]) == (0, 1, 2)
    assert varys_order([[1.0], [1.0]]) == (0, 1)
    assert sincronia_order([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]) == (0, 2, 1)
    assert sincronia_order(np.zeros((0, 3))) == ()


def test_big_switch_loads_from_flows() -> None:
    # job 0: ring over hosts 0,1,2; job 1: hosts 2 -> 3
    loads = big_switch_loads([0, 0, 0, 1], [0, 1, 2, 2], [1, 2, 0, 3], [1.0, 1.0, 1.0, 5.0], shape=(2, 4))
    assert loads[0].tolist() == [1, 1, 1, 0, 1, 1, 1, 0]
    assert loads[1].tolist() == [0, 0, 5, 0, 0, 0, 0, 5]
    assert sincronia_order(loads) == (0, 1)


def test_bad_inputs() -> None:
    with pytest.raises(InputError, match="coflows x ports"):
        sincronia_order([1.0, 2.0])
    with pytest.raises(InputError, match="bytes >= 0"):
        varys_order([[-1.0]])
    with pytest.raises(InputError, match="weights"):
        sincronia_order([[1.0]], weights=[1.0, 2.0])
    with pytest.raises(InputError, match="port_rates"):
        varys_order([[1.0]], port_rates=[0.0])
    with pytest.raises(InputError, match="src_host"):
        big_switch_loads([0], [5], [0], [1.0], shape=(1, 2))
