"""Every transport returns exactly the NumPy reference sum (random tensors, parts, workers)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from commsched.runtime.ps.client import PSClient
from commsched.runtime.ps.keys import ServerMap
from commsched.runtime.ps.transports import TransportConfig, transport_registry
from tests.runtime_ps.conftest import run_workers, servers

SIZES = (1, 7, 1000, 1024, 5003, 20_000)


def _data(workers: int, seed: int, dtype: type = np.float32) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(n).astype(dtype) for n in SIZES] for _ in range(workers)]


@pytest.mark.parametrize("transport", transport_registry().names())
@pytest.mark.parametrize("workers", [2, 3])
def test_sum_equals_numpy(
    transport: str, workers: int, small_config: Callable[[str], TransportConfig]
) -> None:
    data = _data(workers, seed=workers)
    ref = [np.sum([data[r][i] for r in range(workers)], axis=0) for i in range(len(SIZES))]

    def body(c: PSClient) -> list[list[np.ndarray]]:
        rounds = []
        for it in range(3):  # per-iteration reset: the same keys, summed afresh each round
            hs = [
                c.push_pull_async(d * (it + 1), name=f"t{i}", priority=i % 3)
                for i, d in enumerate(data[c.rank])
            ]
            rounds.append([h.wait(20) for h in hs])
        return rounds

    with servers(2, workers) as srv:
        out = run_workers(srv, workers, small_config(transport), body)
        assert srv[0].summed_bytes() + srv[1].summed_bytes() == 3 * workers * sum(SIZES) * 4
    for r in range(workers):
        for it in range(3):
            for i, got in enumerate(out[r][it]):
                np.testing.assert_allclose(got, ref[i] * (it + 1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("transport", ["fifo", "mercury"])
def test_fp16_accumulates_in_fp32(transport: str, small_config: Callable[[str], TransportConfig]) -> None:
    data = _data(3, seed=5, dtype=np.float16)
    ref = [
        np.sum([data[r][i].astype(np.float32) for r in range(3)], axis=0).astype(np.float16) for i in range(6)
    ]

    def body(c: PSClient) -> list[np.ndarray]:
        return [c.push_pull(d, name=f"h{i}") for i, d in enumerate(data[c.rank])]

    with servers(1, 3) as srv:
        out = run_workers(srv, 3, small_config(transport), body)
    for i, got in enumerate(out[0]):
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, ref[i])


def test_average_and_late_joiner(small_config: Callable[[str], TransportConfig]) -> None:
    data = _data(3, seed=9)

    def body(c: PSClient) -> list[np.ndarray]:
        return [c.push_pull(d, name=f"t{i}", average=True) for i, d in enumerate(data[c.rank])]

    with servers(1, 3) as srv:
        out = run_workers(srv, 3, small_config("mercury"), body, delays={2: 0.5})
    for i in range(len(SIZES)):
        np.testing.assert_allclose(
            out[1][i], np.mean([data[r][i] for r in range(3)], axis=0), rtol=1e-6, atol=1e-7
        )


def test_mixed_mode_split_sums_and_shares(small_config: Callable[[str], TransportConfig]) -> None:
    smap = ServerMap(num_servers=4, mode="mixed", cpu_servers=2, num_workers=2)
    data = _data(2, seed=3)

    def body(c: PSClient) -> list[np.ndarray]:
        return [c.push_pull(d, name=f"t{i}") for i, d in enumerate(data[c.rank])]

    with servers(4, 2) as srv:
        out = run_workers(srv, 2, small_config("bytescheduler"), body, server_map=smap)
        loads = [s.summed_bytes() for s in srv]
    for i in range(len(SIZES)):
        np.testing.assert_allclose(out[0][i], data[0][i] + data[1][i], rtol=1e-6)
    assert sum(loads) == 2 * sum(SIZES) * 4
    assert loads[0] + loads[1] > 0  # the CPU servers take part


@pytest.mark.parametrize("transport", ["fifo", "bytescheduler"])
def test_parts_larger_than_a_reply_slice(transport: str) -> None:
    """Pull data leaves in DATA_SLICE_BYTES slices: parts of several slices, odd tails, two servers."""
    from commsched.runtime.ps.server import DATA_SLICE_BYTES

    part = 3 * DATA_SLICE_BYTES + 12  # bytes: three whole slices and a tail
    cfg = TransportConfig(name=transport, partition_bytes=part, credit_bytes=2 * part)
    rng = np.random.default_rng(7)
    sizes = (part // 4 * 3 + 5, DATA_SLICE_BYTES // 4 + 1)  # elements: several parts; one slice + 1
    data = [[rng.standard_normal(n).astype(np.float32) for n in sizes] for _ in range(2)]

    def body(c: PSClient) -> list[np.ndarray]:
        hs = [c.push_pull_async(d, name=f"big{i}", priority=i) for i, d in enumerate(data[c.rank])]
        return [h.wait(20) for h in hs]

    with servers(2, 2) as srv:
        out = run_workers(srv, 2, cfg, body)
    for r in range(2):
        for i, got in enumerate(out[r]):
            np.testing.assert_allclose(got, data[0][i] + data[1][i], rtol=1e-6, atol=1e-6)
