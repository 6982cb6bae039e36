"""GPU gradient buckets through pinned host buffers (the device side stood in for by CPU tensors)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from commsched.runtime.torch.hooks import HookState  # noqa: E402
from commsched.runtime.torch.staging import HostDevice, Stager  # noqa: E402


class _Comm:
    """Two ranks whose other rank holds twice this one's values: the sum is three times them."""

    world_size = 2

    def __init__(self) -> None:
        self.seen: list[int] = []

    def all_reduce(self, arr: Any) -> None:
        self.seen.append(arr.size)
        arr *= 3.0

    def close(self) -> None:
        pass


def test_host_buffers_are_reused_per_bucket_and_copies_are_ordered() -> None:
    dev = HostDevice()
    st = Stager(dev)
    a = torch.arange(6, dtype=torch.float32)
    host, done = st.copy_out(0, a)
    done.synchronize()
    assert torch.equal(host, a) and dev.log[:3] == ["pin 6", "wait-compute", "side"]
    again, _ = st.copy_out(0, a + 1)
    assert again is host and dev.allocated == 1  # the same pinned buffer every iteration
    st.copy_out(1, torch.zeros(3))
    assert st.buffers == 2 and dev.allocated == 2
    st.copy_out(1, torch.zeros(5))  # the bucket was rebuilt with another size
    assert st.buffers == 2 and dev.allocated == 3
    out = torch.zeros(6)
    st.copy_back(torch.full((6,), 7.0), out).synchronize()
    assert torch.equal(out, torch.full((6,), 7.0))


def test_staged_bucket_is_averaged_and_written_back() -> None:
    state = HookState(_Comm(), stager=Stager(HostDevice()))  # type: ignore[arg-type]
    try:
        grad = torch.tensor([1.0, 2.0, 4.0])
        host, done = state.stager.copy_out(0, grad)
        fut: Any = torch.futures.Future()
        state._reduce_staged(grad, host, done, fut)
        assert fut.wait() is grad
        assert torch.allclose(grad, torch.tensor([1.5, 3.0, 6.0]))  # (x + 2x) / 2 ranks
        log = state.stager._fixed.log  # type: ignore[attr-defined]
        assert log.count("sync") == 2  # the copy out waited for, then the copy back
    finally:
        state.close()
