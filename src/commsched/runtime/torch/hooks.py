"""The DDP communication hook and the helpers that set it up (see the package docstring).

No ``from __future__ import annotations`` here: DDP checks the hook's annotations at run time.
"""

from typing import Any

import torch
import torch.distributed as dist

from commsched.errors import InputError
from commsched.runtime.transport.communicator import DEFAULT_OPTIONS, Communicator, Options
from commsched.runtime.transport.group import Group, GroupConfig
from commsched.runtime.transport.policy import as_policy
from commsched.runtime.transport.wire import make_listener


def allreduce_hook(
    comm: Communicator,
    bucket: dist.GradBucket,  # type: ignore[name-defined,unused-ignore]  # exported at run time only; DDP checks it
) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: sum ``bucket.buffer()`` over all ranks with commsched, divide by ranks.

    The bucket's flat CPU tensor is reduced in place through a NumPy view (no copy); the returned
    future is already complete, so DDP proceeds as soon as the all-reduce returns.
    """
    buf = bucket.buffer()
    if buf.device.type != "cpu" or not buf.is_contiguous():
        raise InputError(f"gradient bucket on {buf.device}", where="allreduce_hook", expected="a CPU tensor")
    arr = buf.detach().numpy()
    comm.all_reduce(arr)
    arr /= comm.world_size
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(buf)
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


def install(ddp_model: Any, *, job: str, options: Options = DEFAULT_OPTIONS) -> Communicator:
    """Route ``ddp_model``'s gradient all-reduce through commsched; returns the communicator (close it)."""
    comm = join_default_group(job=job, options=options)
    ddp_model.register_comm_hook(comm, allreduce_hook)
    return comm
