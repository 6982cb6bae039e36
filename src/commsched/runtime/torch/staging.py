"""Gradient buckets on a GPU, staged through reused pinned host buffers for commsched's transport.

The transport moves host memory (NumPy). For a bucket on a CUDA device the hook
(:func:`commsched.runtime.torch.allreduce_hook`) asks :class:`Stager` to

1. **copy it out** on a side stream, after the compute stream has produced it (an event recorded on
   the compute stream, waited for by the side stream), into a pinned host buffer kept for that
   bucket (same index, size and dtype: allocated once, reused every iteration); the compute stream
   goes on with the backward pass of the next buckets meanwhile;
2. once the copy is done (its event, waited for on the hook's worker thread, not on the training
   thread), the transport all-reduces the host buffer;
3. **copy it back** on the side stream, and the bucket's future completes when that copy is done.

Cost, from the staging measured on one H200 (PyTorch 2.11, ``reference/runtime-notes.md`` §14):
pinned host memory moves 55.3 GB/s each way, about 18 ms per GB out and 18 ms per GB back
(pageable memory: 18.3 GB/s out and 9.6 GB/s back, which is why the buffers are pinned and kept).
The copy out overlaps with the rest of the backward pass; the copy back adds its time after the
all-reduce of each bucket. At the rates the transport reaches (0.1-1 GB/s on the machines measured,
``docs/runtime-transport.md``) the copies are 2-20 % of a bucket's all-reduce time.

The device side (streams, events, pinned allocation) is one small object, :class:`CudaDevice`, so
that the staging logic is tested without a GPU (:class:`commsched.runtime.torch.staging.HostDevice`
stands in for it with plain CPU tensors and records what was done).
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

__all__ = ["CudaDevice", "HostDevice", "Stager"]


class CudaDevice:
    """Streams, events and pinned memory of the CUDA device a bucket is on."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.side = torch.cuda.Stream(device=device)  # type: ignore[no-untyped-call]

    def pinned(self, numel: int, dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(numel, dtype=dtype, pin_memory=True)

    def on_side(self) -> AbstractContextManager[Any]:
        return torch.cuda.stream(self.side)

    def after_compute(self) -> None:
        """Make the side stream wait for what the compute stream has queued so far."""
        self.side.wait_stream(torch.cuda.current_stream(self.device))

    def event(self) -> Any:
        ev = torch.cuda.Event()  # type: ignore[no-untyped-call]
        ev.record(self.side)
        return ev


class HostDevice:
    """A stand-in for :class:`CudaDevice` with CPU tensors: copies run at once, steps are logged."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.allocated = 0

    def pinned(self, numel: int, dtype: torch.dtype) -> torch.Tensor:
        self.allocated += 1
        self.log.append(f"pin {numel}")
        return torch.empty(numel, dtype=dtype)

    def on_side(self) -> AbstractContextManager[Any]:
        self.log.append("side")
        return nullcontext()

    def after_compute(self) -> None:
        self.log.append("wait-compute")

    def event(self) -> Any:
        log = self.log

        class _Done:
            def synchronize(self) -> None:
                log.append("sync")

        return _Done()


class Stager:
    """Pinned host buffers per bucket, and the copies out and back (see the module docstring).

    ``device``: the device helper (default: a :class:`CudaDevice` per CUDA device seen).
    """

    def __init__(self, device: Any = None) -> None:
        self._fixed = device
        self._devices: dict[Any, Any] = {}
        self._buffers: dict[tuple[int, int, torch.dtype], torch.Tensor] = {}
        self._lock = threading.Lock()

    def _device(self, t: torch.Tensor) -> Any:
        if self._fixed is not None:
            return self._fixed
        with self._lock:
            if t.device not in self._devices:
                self._devices[t.device] = CudaDevice(t.device)
            return self._devices[t.device]

    def host_buffer(self, index: int, t: torch.Tensor) -> torch.Tensor:
        """The pinned buffer of bucket ``index`` (made on first use, reused while its size holds)."""
        key = (index, t.numel(), t.dtype)
        dev = self._device(t)  # outside the lock, which it takes itself (not reentrant)
        with self._lock:
            buf = self._buffers.get(key)
            if buf is None:
                for old in [k for k in self._buffers if k[0] == index]:
                    del self._buffers[old]  # the bucket was rebuilt with another size
                buf = self._buffers[key] = dev.pinned(t.numel(), t.dtype)
            return buf

    def copy_out(self, index: int, t: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """Queue the copy of ``t`` (on its device) to its host buffer; the buffer and the copy's event.

        Call on the training thread (the hook), so the side stream waits for the compute stream's
        work up to this bucket.
        """
        dev = self._device(t)
        host = self.host_buffer(index, t)
        dev.after_compute()
        with dev.on_side():
            host.copy_(t.detach().reshape(-1), non_blocking=True)
            return host, dev.event()

    def copy_back(self, host: torch.Tensor, t: torch.Tensor) -> Any:
        """Queue the copy of ``host`` back into ``t``; the copy's event (wait for it before use)."""
        dev = self._device(t)
        with dev.on_side():
            t.view(-1).copy_(host, non_blocking=True)
            return dev.event()

    @property
    def buffers(self) -> int:
        """How many host buffers are held."""
        return len(self._buffers)
