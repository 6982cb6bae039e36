"""The Horovod/BytePS-shaped PyTorch API over the parameter-server runtime.

``import commsched.runtime.ps.torch as bps`` then, as with ``byteps.torch``::

    bps.init()                                   # roles from DMLC_* or torchrun variables
    opt = bps.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    bps.broadcast_parameters(model.state_dict(), root_rank=0)
    bps.broadcast_optimizer_state(opt, root_rank=0)

:class:`DistributedOptimizer` hooks every parameter when its gradient is accumulated and starts its
``push_pull`` at once with priority = the position of the parameter's layer from the input side
(BytePS's PyTorch plugin passes no priority; Mercury and ByteScheduler need it). ``step()`` waits for
the averaged gradients, then runs the wrapped optimizer. ``COMMSCHED_PS_TIMELINE=path`` writes a
Chrome trace (queueing and transfer per tensor) at :func:`shutdown`.

The functions act on one process-wide :class:`PSContext` (the Horovod shape); tests and embedders can
pass their own context instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch

from commsched.runtime.ps.client import Handle, PSClient
from commsched.runtime.ps.errors import PSError
from commsched.runtime.ps.launch import Worker, start_worker
from commsched.runtime.ps.roles import role_from_env


class PSContext:
    """One worker's handle on the job: its client, rank, sizes and timeout."""

    def __init__(self, client: PSClient, *, local_rank: int = 0, timeout_s: float = 60.0,
                 worker: Worker | None = None) -> None:  # fmt: skip
        self.client = client
        self.local_rank = local_rank
        self.timeout_s = timeout_s
        self.worker = worker

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
        else:
            self.client.close()


class _Default:
    """Holder of the process-wide context of the Horovod-shaped functions."""

    context: PSContext | None = None


def init(env: Mapping[str, str] | None = None) -> PSContext:
    """Join the job described by the environment (``DMLC_*`` or ``torchrun``); returns the context."""
    role = role_from_env(env)
    worker = start_worker(role)
    _Default.context = PSContext(
        worker.client, local_rank=role.local_rank, timeout_s=role.timeout_s, worker=worker
    )
    return _Default.context


def _ctx(context: PSContext | None) -> PSContext:
    ctx = context or _Default.context
    if ctx is None:
        raise PSError("commsched.runtime.ps.torch: call init() first")
    return ctx


def shutdown(context: PSContext | None = None) -> None:
    """Leave the job (writes the timeline if ``COMMSCHED_PS_TIMELINE`` is set)."""
    ctx = _ctx(context)
    path = os.environ.get("COMMSCHED_PS_TIMELINE")
    if path:
        write_timeline(path, ctx)
    ctx.close()
    if ctx is _Default.context:
        _Default.context = None


def size(context: PSContext | None = None) -> int:
    return _ctx(context).client.num_workers


def rank(context: PSContext | None = None) -> int:
    return _ctx(context).client.rank


def local_rank(context: PSContext | None = None) -> int:
    return _ctx(context).local_rank


def timeline(context: PSContext | None = None) -> list[dict[str, object]]:
    """Chrome-trace events so far: per tensor a ``queue`` and a ``transfer`` span (microseconds)."""
    return list(_ctx(context).client.events)


def write_timeline(path: str, context: PSContext | None = None) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump({"traceEvents": timeline(context), "displayTimeUnit": "ms"}, fh)


def _numpy(tensor: torch.Tensor) -> np.ndarray[Any, Any]:
    if tensor.dtype not in (torch.float32, torch.float16):
        raise PSError(f"push_pull: dtype {tensor.dtype} (expected torch.float32 or torch.float16)")
    out: np.ndarray[Any, Any] = tensor.detach().cpu().contiguous().numpy()
    return out


def push_pull_async(tensor: torch.Tensor, *, average: bool = True, name: str, priority: int = 0,
                    context: PSContext | None = None) -> Handle:  # fmt: skip
    """Start summing ``tensor`` over all workers (lower ``priority`` = more urgent)."""
    return _ctx(context).client.push_pull_async(_numpy(tensor), name=name, priority=priority, average=average)


def synchronize(handle: Handle, context: PSContext | None = None) -> torch.Tensor:
    """Wait for a ``push_pull`` and return its result as a tensor."""
    return torch.from_numpy(handle.wait(_ctx(context).timeout_s))


def push_pull(tensor: torch.Tensor, average: bool = True, name: str | None = None, priority: int = 0,
              context: PSContext | None = None) -> torch.Tensor:  # fmt: skip
    """The sum (or average) of ``tensor`` over all workers, BytePS's ``push_pull``."""
    if name is None:
        raise PSError("push_pull needs a name (every worker must use the same name for the same tensor)")
    h = push_pull_async(tensor, average=average, name=name, priority=priority, context=context)
    return synchronize(h, context).reshape(tensor.shape).to(tensor.device)


def _broadcast(tensor: torch.Tensor, name: str, root_rank: int, ctx: PSContext) -> torch.Tensor:
    """Root's values everywhere: the others push zeros (x + 0 is exact)."""
    src = tensor.detach().to(torch.float32)
    mine = src if ctx.client.rank == root_rank else torch.zeros_like(src)
    return push_pull(mine, average=False, name=name, context=ctx).to(tensor.dtype)


def broadcast_parameters(params: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]],
                         root_rank: int = 0, context: PSContext | None = None) -> None:  # fmt: skip
    """Overwrite every worker's parameters (a ``state_dict`` or ``named_parameters``) with the root's."""
    ctx = _ctx(context)
    items = sorted(params.items() if isinstance(params, Mapping) else params, key=lambda kv: kv[0])
    with torch.no_grad():
        for name, p in items:
            if p.is_floating_point():
                p.copy_(_broadcast(p, f"Parameter.{name}", root_rank, ctx))


def broadcast_optimizer_state(optimizer: torch.optim.Optimizer, root_rank: int = 0,
                              context: PSContext | None = None) -> None:  # fmt: skip
    """Make every worker's optimizer state (tensors and numeric options) the root's."""
    ctx = _ctx(context)
    state = optimizer.state_dict()
    for gi, group in enumerate(state["param_groups"]):
        for key in sorted(group):
            if isinstance(group[key], float | int) and not isinstance(group[key], bool) and key != "params":
                t = torch.tensor([float(group[key])], dtype=torch.float32)
                val = float(_broadcast(t, f"OptGroup.{gi}.{key}", root_rank, ctx)[0])
                group[key] = type(group[key])(val)
    for pid in sorted(state["state"]):
        for key in sorted(state["state"][pid]):
            v = state["state"][pid][key]
            if isinstance(v, torch.Tensor) and v.is_floating_point():
                state["state"][pid][key] = _broadcast(v, f"OptState.{pid}.{key}", root_rank, ctx).reshape(
                    v.shape
                )
    optimizer.load_state_dict(state)


class _DistributedOptimizer:
    """Methods mixed in front of the user's optimizer class (BytePS and Horovod build it likewise)."""

    _ps_ctx: PSContext
    _ps_names: dict[torch.Tensor, tuple[str, int]]
    _ps_handles: dict[torch.Tensor, Handle]

    _ps_outs: dict[torch.Tensor, np.ndarray[Any, Any]]

    def _ps_hook(self, p: torch.Tensor) -> None:
        name, prio = self._ps_names[p]
        assert p.grad is not None  # the hook runs after accumulation
        src = _numpy(p.grad)
        out = self._ps_outs.get(p)
        if out is None or out.shape != src.shape or out.dtype != src.dtype:  # one result buffer a parameter
            out = self._ps_outs[p] = np.empty_like(src)
        self._ps_handles[p] = self._ps_ctx.client.push_pull_async(
            src, name=name, priority=prio, average=True, out=out
        )

    def synchronize(self) -> None:
        """Wait for every started ``push_pull`` and write the averaged gradients back."""
        for p, h in list(self._ps_handles.items()):
            out = torch.from_numpy(h.wait(self._ps_ctx.timeout_s))
            assert p.grad is not None
            p.grad.copy_(out.reshape(p.grad.shape))
        self._ps_handles.clear()

    def step(self, closure: Any = None) -> Any:
        self.synchronize()
        return super().step(closure)  # type: ignore[misc]  # the wrapped optimizer's step


def _layer_positions(named: list[tuple[str, torch.Tensor]]) -> dict[str, int]:
    """Layer (module path) -> position from the input side, in ``named_parameters`` order."""
    pos: dict[str, int] = {}
    for name, _ in named:
        pos.setdefault(name.rsplit(".", 1)[0] if "." in name else name, len(pos))
    return pos


def DistributedOptimizer(
    optimizer: torch.optim.Optimizer,
    named_parameters: Iterable[tuple[str, torch.Tensor]] | None = None,
    *,
    context: PSContext | None = None,
) -> torch.optim.Optimizer:
    """Wrap ``optimizer`` so that gradients are averaged over all workers, front layers first."""
    ctx = _ctx(context)
    if named_parameters is None:
        params = [p for g in optimizer.param_groups for p in g["params"]]
        named = [(f"param.{i}", p) for i, p in enumerate(params)]
    else:
        named = list(named_parameters)
    layers = _layer_positions(named)
    cls = type(optimizer.__class__.__name__, (_DistributedOptimizer, optimizer.__class__), {})
    optimizer.__class__ = cls
    dist: Any = optimizer
    dist._ps_ctx = ctx
    dist._ps_handles = {}
    dist._ps_names = {}
    dist._ps_outs = {}
    for name in sorted(n for n, _ in named):  # BytePS declares sorted names
        ctx.client.declare(f"Gradient.{name}")
    for name, p in named:
        if p.requires_grad:
            layer = name.rsplit(".", 1)[0] if "." in name else name
            dist._ps_names[p] = (f"Gradient.{name}", layers[layer])
            p.register_post_accumulate_grad_hook(dist._ps_hook)
    return optimizer
