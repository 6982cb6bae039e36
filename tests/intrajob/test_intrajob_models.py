"""Hand-worked cases of the iteration-time models (Mercury §V) and their invariants."""

from __future__ import annotations

import numpy as np
import pytest

from commsched.errors import InputError
from commsched.intrajob import (
    iteration_time,
    layers_iteration_time,
    make_problem,
    mercury,
    mercury_no_preemption,
    oracle_schedule,
    oracle_time,
    simulate_iteration,
    wfbp,
)
from commsched.intrajob.iteration import bp_end_times
from commsched.workload import LayerProfile

# Sizes are in bytes and the bandwidth is 8 bit/s, so a layer of S bytes pushes in S seconds.
BW = 8.0


def case_b():
    # Case B (3 layers, forward order 1..3): t_bp = (1, 2, 1), t_fp = (1, 1, 1), t_upd = (0.5, 0, 0),
    # t_push = t_pull = (1, 3, 0.5).
    return make_problem(
        bandwidth_bps=BW, size_bytes=[1, 3, 0.5], bp_s=[1, 2, 1], fp_s=[1, 1, 1], upd_s=[0.5, 0, 0]
    )


def test_wfbp_case_a_two_equal_layers():
    # Case A: t_bp = t_fp = t_push = (1, 1).
    # tau_bp^2 = 1, tau_bp^1 = 2 (Eq. 3).
    # Eq. 6: tau_push^2 = 1 + 1 = 2; tau_push^1 = max(2, 2) + 1 = 3.
    # Eq. 7: tau_pull^2 = 3; tau_pull^1 = 4.
    # Eq. 4: tau_fp^1 = 4 + 1 = 5; tau_fp^2 = max(3, 5) + 1 = 6 = t_iter (Eq. 5). Oracle = 4.
    p = make_problem(bandwidth_bps=BW, size_bytes=[1, 1], bp_s=[1, 1], fp_s=[1, 1])
    tl = simulate_iteration(p, wfbp, name="wfbp")
    assert [lt.push_end_s for lt in tl.layers] == [3.0, 2.0]
    assert [lt.pull_end_s for lt in tl.layers] == [4.0, 3.0]
    assert [lt.fp_end_s for lt in tl.layers] == [5.0, 6.0]
    assert tl.iteration_s == 6.0
    assert tl.oracle_s == 4.0
    assert tl.normalized_speed == pytest.approx(4 / 6)


def test_wfbp_case_b_three_layers_with_update():
    # Case B: tau_bp = (4, 3, 1).
    # push^3: 1 + 0.5 = 1.5, pull^3 = 2.
    # push^2: max(3, 1.5) + 3 = 6, pull^2 = 9.
    # push^1: max(4, 6) + 1 = 7, pull^1 = 8.
    # fp^1 = 8 + 0.5 + 1 = 9.5; fp^2 = max(9, 9.5) + 1 = 10.5; fp^3 = max(2, 10.5) + 1 = 11.5.
    p = case_b()
    s = wfbp(p)
    assert s.push_end_s.tolist() == [7.0, 6.0, 1.5]
    assert s.push_start_s.tolist() == [6.0, 3.0, 1.0]
    assert s.pull_end_s.tolist() == [8.0, 9.0, 2.0]
    assert iteration_time(p, wfbp) == 11.5
    assert oracle_time(p) == 7.5


def test_wfbp_case_c_single_layer():
    # Case C: one layer, t_bp = 2, t_push = 3, t_fp = 1: push [2, 5], pull until 8, fp until 9.
    p = make_problem(bandwidth_bps=BW, size_bytes=[3], bp_s=[2], fp_s=[1])
    assert iteration_time(p, wfbp) == 9.0


def test_mercury_case_b_preempts():
    # Mercury on case B: layer 3 pushes [1, 1.5]; layer 2 from 3; at 4 layer 1 preempts (layer 2 has
    # 2 s left), layer 1 pushes [4, 5], layer 2 resumes [5, 7]. Pull = push (Eq. 8).
    # fp^1 = 5 + 0.5 + 1 = 6.5; fp^2 = max(7, 6.5) + 1 = 8; fp^3 = max(1.5, 8) + 1 = 9.
    p = case_b()
    tl = simulate_iteration(p, mercury)
    assert [lt.push_end_s for lt in tl.layers] == [5.0, 7.0, 1.5]
    assert [lt.push_start_s for lt in tl.layers] == [4.0, 3.0, 1.0]
    assert [lt.pull_end_s for lt in tl.layers] == [5.0, 7.0, 1.5]
    assert tl.iteration_s == 9.0
    assert tl.layers[0].upd_start_s == 5.0 and tl.layers[0].fp_start_s == 5.5


def test_mercury_without_preemption_case_b():
    # FIFO pushes equal WFBP's (7, 6, 1.5) but pull = push: fp^1 = 8.5, fp^2 = 9.5, fp^3 = 10.5.
    p = case_b()
    s = mercury_no_preemption(p)
    assert s.push_end_s.tolist() == [7.0, 6.0, 1.5]
    assert iteration_time(p, mercury_no_preemption) == 10.5


def _wfbp_loop(p):
    ready = bp_end_times(p)
    push = p.push_s
    end = np.zeros(p.n_layers)
    prev = 0.0
    for layer in range(p.n_layers - 1, -1, -1):
        prev = max(ready[layer], prev) + push[layer]
        end[layer] = prev
    return end


def test_wfbp_vectorised_equals_recurrence():
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(1, 30))
        p = make_problem(
            bandwidth_bps=1e9,
            size_bytes=rng.uniform(0, 1e8, n),
            bp_s=rng.uniform(0, 0.1, n),
            fp_s=rng.uniform(0, 0.1, n),
        )
        np.testing.assert_allclose(wfbp(p).push_end_s, _wfbp_loop(p), rtol=1e-12)


def test_oracle_schedule_gives_eq9():
    p = case_b()
    assert iteration_time(p, oracle_schedule) == oracle_time(p)


def test_mercury_equals_oracle_when_bandwidth_ample():
    # The first layer has no parameters, so nothing needs to be sent after bp^1: with enough bandwidth
    # every push hides behind computation and Mercury is exactly the oracle.
    # Here each push takes 0.15 s. Mercury: push^3 from 0.1, preempted at 0.2 by push^2 [0.2, 0.35],
    # push^3 resumes until 0.40; fp^1 ends 0.4, fp^2 at max(0.35, 0.4) + 0.1, fp^3 at 0.6 = oracle.
    # WFBP: push^3 [0.1, 0.25], push^2 [0.25, 0.40], pull^2 ends 0.55 > 0.4: t_iter = 0.75.
    p = make_problem(
        bandwidth_bps=8e9 / 0.15, size_bytes=[0, 1e9, 1e9], bp_s=[0.1, 0.1, 0.1], fp_s=[0.1, 0.1, 0.1]
    )
    assert iteration_time(p, mercury) == pytest.approx(oracle_time(p), rel=1e-12)
    assert iteration_time(p, wfbp) == pytest.approx(0.75)  # WFBP's pull of layer 2 is not hidden ...
    q = p.with_bandwidth(8e15)
    assert iteration_time(q, wfbp) == pytest.approx(oracle_time(q), rel=1e-6)  # ... until B grows


def test_layers_iteration_time_from_profile():
    layers = [
        LayerProfile(name="conv", forward_s=0.01, backward_s=0.02, param_bytes=1e6),
        LayerProfile(name="fc", forward_s=0.01, backward_s=0.02, param_bytes=4e8),
    ]
    t = layers_iteration_time(layers, bandwidth_bps=10e9)
    assert t >= 0.06
    assert layers_iteration_time(layers, bandwidth_bps=10e9, policy=wfbp) >= t


def test_timeline_is_consistent():
    rng = np.random.default_rng(3)
    p = make_problem(
        bandwidth_bps=5e9,
        size_bytes=rng.uniform(0, 1e8, 12),
        bp_s=rng.uniform(0, 0.02, 12),
        fp_s=rng.uniform(0, 0.02, 12),
        upd_s=0.001,
    )
    for pol in (wfbp, mercury, mercury_no_preemption):
        tl = simulate_iteration(p, pol)
        for lt in tl.layers:
            assert lt.bp_end_s <= lt.push_start_s + 1e-12
            assert lt.push_start_s <= lt.push_end_s <= lt.pull_end_s
            assert lt.pull_end_s <= lt.upd_start_s + 1e-12
            assert lt.upd_start_s <= lt.fp_start_s <= lt.fp_end_s
        assert tl.iteration_s == tl.layers[-1].fp_end_s


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"size_bytes": [1, -1]}, "size_bytes"),
        ({"bp_s": [1]}, "bp_s"),
        ({"bandwidth_bps": 0.0}, "bandwidth_bps"),
        ({"size_bytes": []}, "size_bytes"),
    ],
)
def test_bad_inputs_raise_input_error(kwargs, field):
    args = {"bandwidth_bps": 1.0, "size_bytes": [1, 1], "bp_s": [1, 1], "fp_s": [1, 1]} | kwargs
    with pytest.raises(InputError) as err:
        make_problem(**args)
    assert err.value.where == field
