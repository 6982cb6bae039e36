"""The per-layer profile of a measured step, and the small parsers the readers share."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from commsched.errors import InputError
from commsched.workload.profiling import GradientReady, ModuleTime, layers_from_timeline
from commsched.workload.profiling.kineto_events import union_s
from commsched.workload.profiling.tracefile import parse_size
from commsched.workload.profiling.types import element_size


def test_orphan_parameters_become_a_layer_after_their_parent() -> None:
    mods = [ModuleTime(name="enc.a", forward_s=1.0), ModuleTime(name="head.dec", forward_s=1.0)]
    grads = [
        GradientReady(name="head.bias", size_bytes=4, ready_s=0.1),  # owned by no leaf module
        GradientReady(name="head.dec.weight", size_bytes=8, ready_s=0.2),
        GradientReady(name="enc.a.weight", size_bytes=16, ready_s=1.0),
    ]
    layers = layers_from_timeline(mods, grads, forward_s=2.0, backward_s=1.0)
    assert [(ly.name, ly.param_bytes) for ly in layers] == [("enc.a", 16), ("head.dec", 8), ("head", 4)]
    assert [ly.forward_s for ly in layers] == [1.0, 1.0, 0.0]
    # ready times, last layer first: head 0.1, head.dec 0.2, enc.a 1.0 -> backward 0.1, 0.1, 0.8
    assert [round(ly.backward_s, 12) for ly in layers] == [0.8, 0.1, 0.1]


def test_a_gradient_ready_out_of_order_counts_with_the_later_layer() -> None:
    mods = [ModuleTime(name=n, forward_s=1.0) for n in ("a", "b", "c")]
    grads = [
        GradientReady(name="c.w", size_bytes=1, ready_s=0.3),
        GradientReady(name="a.w", size_bytes=1, ready_s=0.5),  # earlier than b's
        GradientReady(name="b.w", size_bytes=1, ready_s=0.6),
    ]
    layers = layers_from_timeline(mods, grads, forward_s=3.0, backward_s=0.6)
    assert [round(ly.backward_s, 12) for ly in layers] == [0.0, 0.3, 0.3]


def test_no_gradients_or_bad_times_are_errors() -> None:
    with pytest.raises(InputError, match="no parameter gradients"):
        layers_from_timeline([ModuleTime(name="a", forward_s=1.0)], [], forward_s=1.0, backward_s=1.0)
    with pytest.raises(InputError, match="non-finite"):
        layers_from_timeline(
            [], [GradientReady(name="a.w", size_bytes=1, ready_s=math.nan)], forward_s=1.0, backward_s=1.0
        )


names = st.sampled_from(["l0", "l1", "l2", "l3", "l4"])


@given(
    fwd=st.lists(st.floats(0, 1), min_size=1, max_size=5),
    grads=st.lists(st.tuples(names, st.integers(0, 10**6), st.floats(0, 2)), min_size=1, max_size=12),
    totals=st.tuples(st.floats(1e-6, 10), st.floats(1e-6, 10)),
)
# a subnormal ready time once made the backward scale overflow to inf
@example(fwd=[0.0], grads=[("l0", 0, 1.1125369292536007e-308)], totals=(1.0, 2.0))
def test_layers_conserve_times_and_bytes(
    fwd: list[float], grads: list[tuple[str, int, float]], totals: tuple[float, float]
) -> None:
    mods = [ModuleTime(name=f"l{k}", forward_s=f) for k, f in enumerate(fwd)]
    ready = [GradientReady(name=f"{n}.p{k}", size_bytes=b, ready_s=r) for k, (n, b, r) in enumerate(grads)]
    layers = layers_from_timeline(mods, ready, forward_s=totals[0], backward_s=totals[1])
    assert math.isclose(sum(ly.forward_s for ly in layers), totals[0], rel_tol=1e-9)
    assert math.isclose(sum(ly.backward_s for ly in layers), totals[1], rel_tol=1e-9)
    assert sum(ly.param_bytes for ly in layers) == sum(b for _, b, _ in grads)
    assert all(ly.forward_s >= 0 and ly.backward_s >= -1e-12 for ly in layers)
    assert len({ly.name for ly in layers}) == len(layers)


def test_sizes_types_and_unions() -> None:
    assert (
        parse_size("512MB") == 512 * 10**6 and parse_size("2GiB") == 2 * 2**30 and parse_size("1e3") == 1000
    )
    for bad in ("", "12XB", "-5", "0"):
        with pytest.raises(InputError, match="--max-bytes"):
            parse_size(bad)
    assert [element_size(t) for t in ("float", "c10::BFloat16", "long int", "Tensor(double)")] == [4, 2, 8, 8]
    with pytest.raises(InputError, match="unknown tensor type"):
        element_size("quaternion")
    assert union_s([]) == 0.0 and union_s([(0, 1e6), (0, 1e6)]) == 1.0
