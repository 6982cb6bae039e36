"""The DDP communication hook and the helpers that set it up (see the package docstring).

No ``from __future__ import annotations`` here: DDP checks the hook's annotations at run time.
"""

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
import torch.distributed as dist

from commsched.errors import InputError
from commsched.runtime.torch.staging import Stager
from commsched.runtime.transport.communicator import DEFAULT_OPTIONS, Communicator, Options
from commsched.runtime.transport.group import Group, GroupConfig
from commsched.runtime.transport.policy import as_policy
from commsched.runtime.transport.sockets import make_listener


class HookState:
    """The state DDP hands to :func:`allreduce_hook`: the communicator, one worker thread, the stager.

    Buckets are all-reduced on the worker, one at a time in the order DDP hands them over (the same
    order on every rank), while backward goes on computing the next buckets' gradients, as DDP's own
    asynchronous all-reduce does. A bucket on a GPU goes through a pinned host buffer of its own
    (:class:`~commsched.runtime.torch.staging.Stager`). Do not use ``comm`` from another thread while
    training runs.
    """

    def __init__(self, comm: Communicator, *, stager: Stager | None = None) -> None:
        self.comm = comm
        self.stager = stager or Stager()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="commsched-ddp")

    def close(self) -> None:
        """Finish the queued buckets and close the communicator."""
        self._worker.shutdown(wait=True)
        self.comm.close()

    def _reduce(self, buf: torch.Tensor, fut: torch.futures.Future[torch.Tensor]) -> None:
        try:
            arr = buf.detach().numpy()
            self.comm.all_reduce(arr)
            arr /= self.comm.world_size
        except Exception as exc:  # handed to DDP, which raises it from backward
            fut.set_exception(exc)  # type: ignore[arg-type,unused-ignore]  # the stub says Tensor
        else:
            fut.set_result(buf)

    def _reduce_staged(
        self, buf: torch.Tensor, host: torch.Tensor, out_done: Any, fut: torch.futures.Future[torch.Tensor]
    ) -> None:
        """A GPU bucket: wait for its copy out, all-reduce the host buffer, copy back, then complete."""
        try:
            out_done.synchronize()
            arr = host.numpy()
            self.comm.all_reduce(arr)
            arr /= self.comm.world_size
            self.stager.copy_back(host, buf).synchronize()
        except Exception as exc:  # handed to DDP, which raises it from backward
            fut.set_exception(exc)  # type: ignore[arg-type,unused-ignore]  # the stub says Tensor
        else:
            fut.set_result(buf)


def allreduce_hook(
    state: HookState,
    bucket: dist.GradBucket,  # type: ignore[name-defined,unused-ignore]  # exported at run time only; DDP checks it
) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: sum ``bucket.buffer()`` over all ranks with commsched, divide by ranks.

    A CPU bucket is reduced in place through a NumPy view (no copy) on the state's worker thread. A
    CUDA bucket is copied to its pinned host buffer on a side stream (overlapping the rest of
    backward), reduced there and copied back (:mod:`commsched.runtime.torch.staging`). The returned
    future completes when the all-reduce (and the copy back) has, with the averaged bucket (DDP's
    default semantics) or with the transport's error.
    """
    buf = bucket.buffer()
    if buf.device.type not in ("cpu", "cuda") or not buf.is_contiguous():
        raise InputError(
            f"gradient bucket on {buf.device}", where="allreduce_hook", expected="a CPU or CUDA tensor"
        )
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    if buf.device.type == "cuda":
        host, done = state.stager.copy_out(bucket.index(), buf)
        state._worker.submit(state._reduce_staged, buf, host, done, fut)
    else:
        state._worker.submit(state._reduce, buf, fut)
    return fut


def join_default_group(*, job: str, options: Options = DEFAULT_OPTIONS) -> Communicator:
    """A :class:`~commsched.runtime.Communicator` with the ranks of ``torch.distributed``'s default group.

    Each rank listens on ``(options.host, 0)``; the addresses are exchanged with ``all_gather_object``
    on the default process group, which must be initialised.
    """
    if not dist.is_available() or not dist.is_initialized():
        raise InputError(
            "torch.distributed is not initialised",
            where="join_default_group",
            expected="init_process_group first",
        )
    policy = as_policy(options.policy)
    rank, world = dist.get_rank(), dist.get_world_size()
    listener = make_listener((options.host, 0), dscp=policy.marking(job, (rank - 1) % world, rank).dscp)
    addresses: list[Any] = [None] * world
    dist.all_gather_object(addresses, listener.getsockname()[:2])
    config = GroupConfig(
        job=job,
        rank=rank,
        world_size=world,
        peers=tuple((str(h), int(p)) for h, p in addresses),
        policy=policy,
        timeout_s=options.timeout_s,
        policy_refresh_s=options.policy_refresh_s,
    )
    return Communicator(Group(config, listener=listener, observer=options.observer))


def install(ddp_model: Any, *, job: str, options: Options = DEFAULT_OPTIONS) -> HookState:
    """Route ``ddp_model``'s gradient all-reduce through commsched; returns the hook state (close it)."""
    state = HookState(join_default_group(job=job, options=options))
    ddp_model.register_comm_hook(state, allreduce_hook)
    return state
