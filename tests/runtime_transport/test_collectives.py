"""Every collective against a NumPy reference: 2-5 ranks, odd sizes, several dtypes and ops."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.errors import InputError
from commsched.runtime import Communicator

from .helpers import run_ranks

DTYPES = [np.float32, np.float64, np.int32, np.int64]


def _data(rank: int, size: int, dtype: type, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed * 1000 + rank)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-1000, 1000, size=size).astype(dtype)
    return rng.standard_normal(size).astype(dtype)


@settings(max_examples=12)
@given(
    n=st.integers(2, 5),
    size=st.integers(0, 1500),
    dtype=st.sampled_from(DTYPES),
    op=st.sampled_from(["sum", "max", "min"]),
    seed=st.integers(0, 10_000),
)
def test_ring_all_reduce_matches_numpy(n: int, size: int, dtype: type, op: str, seed: int) -> None:
    inputs = [_data(r, size, dtype, seed) for r in range(n)]
    ref = {"sum": np.sum, "max": np.max, "min": np.min}[op](np.stack(inputs), axis=0)

    def body(c: Communicator) -> np.ndarray:
        return c.all_reduce(inputs[c.rank].copy(), op=op)

    for out in run_ranks(n, body):
        assert out.dtype == np.dtype(dtype)
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("n", "per_host"), [(4, 2), (6, 3), (6, 2), (3, 1), (3, 3), (2, 2)])
def test_hierarchical_ring_all_reduce_matches_numpy(n: int, per_host: int) -> None:
    size = 1001
    inputs = [_data(r, size, np.float64, n) for r in range(n)]
    ref = np.sum(np.stack(inputs), axis=0)
    outs = run_ranks(
        n,
        lambda c: c.all_reduce(inputs[c.rank].copy(), algorithm="hierarchical_ring"),
        ranks_per_host=per_host,
    )
    for out in outs:
        np.testing.assert_allclose(out, ref, rtol=1e-12)


def test_all_reduce_multidimensional_in_place_and_repeated() -> None:
    def body(c: Communicator) -> list[np.ndarray]:
        outs = []
        for i in range(3):
            x = np.full((3, 5, 7), float(c.rank + i))
            y = c.all_reduce(x)
            assert y is x
            outs.append(x.copy())
        return outs

    for outs in run_ranks(3, body):
        for i, x in enumerate(outs):
            np.testing.assert_array_equal(x, np.full((3, 5, 7), float(0 + 1 + 2 + 3 * i)))


@settings(max_examples=8)
@given(
    n=st.integers(2, 5), shape=st.lists(st.integers(0, 9), min_size=0, max_size=3), seed=st.integers(0, 99)
)
def test_all_gather_matches_numpy(n: int, shape: list[int], seed: int) -> None:
    inputs = [_data(r, int(np.prod(shape)), np.float32, seed).reshape(shape) for r in range(n)]
    for out in run_ranks(n, lambda c: c.all_gather(inputs[c.rank])):
        np.testing.assert_array_equal(out, np.stack(inputs))


@settings(max_examples=8)
@given(n=st.integers(2, 5), tail=st.integers(0, 301), seed=st.integers(0, 99))
def test_all_to_all_matches_numpy(n: int, tail: int, seed: int) -> None:
    inputs = [_data(r, n * tail, np.int64, seed).reshape(n, tail) for r in range(n)]
    outs = run_ranks(n, lambda c: c.all_to_all(inputs[c.rank]))
    for r, out in enumerate(outs):
        np.testing.assert_array_equal(out, np.stack([inputs[i][r] for i in range(n)]))


def test_all_to_all_one_dimensional() -> None:
    outs = run_ranks(3, lambda c: c.all_to_all(np.arange(3) + 10 * c.rank))
    for r, out in enumerate(outs):
        np.testing.assert_array_equal(out, [r + 10 * i for i in range(3)])


def test_send_recv_ring_of_messages() -> None:
    def body(c: Communicator) -> list[np.ndarray]:
        n, r = c.world_size, c.rank
        got = []
        for k in range(3):
            if r % 2 == 0:
                c.send(np.arange(7 + k) * (r + 1), (r + 1) % n)
                got.append(c.recv(np.empty(7 + k, dtype=np.int64), (r - 1) % n))
            else:
                got.append(c.recv(np.empty(7 + k, dtype=np.int64), (r - 1) % n))
                c.send(np.arange(7 + k) * (r + 1), (r + 1) % n)
        return got

    outs = run_ranks(4, body)
    for r, got in enumerate(outs):
        for k, x in enumerate(got):
            np.testing.assert_array_equal(x, np.arange(7 + k) * ((r - 1) % 4 + 1))


def test_large_buffer_spans_many_chunks() -> None:
    size = (9 << 20) // 8 + 13  # > two 4 MiB chunks per segment on 2 ranks, odd length
    outs = run_ranks(2, lambda c: c.all_reduce(np.full(size, c.rank + 0.5)))
    for out in outs:
        assert out.shape == (size,)
        assert np.all(out == 2.0)


def test_single_rank_is_identity() -> None:
    (out,) = run_ranks(1, lambda c: c.all_reduce(np.arange(5.0), algorithm="hierarchical_ring"))
    np.testing.assert_array_equal(out, np.arange(5.0))


def test_bad_arguments_are_input_errors() -> None:
    def body(c: Communicator) -> list[str]:
        msgs = []
        for call in (
            lambda: c.all_reduce(np.arange(4.0), op="avg"),
            lambda: c.all_reduce(np.arange(4.0), algorithm="tree"),
            lambda: c.all_reduce(np.arange(8.0)[::2]),
            lambda: c.all_to_all(np.arange(3.0)),
            lambda: c.send(np.arange(3.0), c.rank),
        ):
            with pytest.raises(InputError) as info:
                call()
            msgs.append(str(info.value))
        return msgs

    msgs = run_ranks(2, body)[0]
    assert "unknown reduce op 'avg'" in msgs[0]
    assert "expected one of ring, hierarchical_ring" in msgs[1]
    assert "C-contiguous" in msgs[2]
    assert "shape (2, ...)" in msgs[3]
