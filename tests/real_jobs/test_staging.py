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


def test_a_stager_that_makes_its_device_per_tensor_does_not_wait_on_its_own_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default stager makes a device helper per CUDA device it meets, under the lock that also
    guards its buffers: a first bucket took that lock twice and the hook hung (seen on an H100, DDP
    on CUDA with the hook: backward never returned). Here the helper is a CPU stand-in made the
    same way; the copy must finish, on a thread given 10 s."""
    import threading

    from commsched.runtime.torch import staging

    made: list[Any] = []

    def fake(device: Any) -> HostDevice:
        made.append(device)
        return HostDevice()

    monkeypatch.setattr(staging, "CudaDevice", fake)
    st = Stager()
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(st.copy_out(0, torch.arange(4.0))), daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "copy_out waited on the stager's own lock"
    host, done = out[0]
    done.synchronize()
    assert torch.equal(host, torch.arange(4.0)) and len(made) == 1
    st.copy_out(1, torch.zeros(2))
    assert len(made) == 1 and st.buffers == 2  # one helper per device, a buffer per bucket
