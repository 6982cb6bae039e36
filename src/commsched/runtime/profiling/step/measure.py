"""Timing a training step with PyTorch: forward, backward, per-module forward, gradient-ready times.

One iteration: gradients are cleared (``set_to_none``), the step runs, and marks are taken at its start,
at the end of the forward pass (after the loss for ``(model, batch, loss_fn)``; at the model's forward
post-hook for ``(model, step)``) and in ``register_post_accumulate_grad_hook`` of every parameter. The
backward time runs from the end of the forward pass to the last gradient accumulated. On a GPU the marks
are CUDA events recorded on the current stream (read after a synchronisation); on a CPU they are
``time.perf_counter`` readings. Timed iterations carry only those hooks; one further instrumented
iteration finds the layers from when the parameters are *used*: a ``TorchFunctionMode`` sees every
outermost torch call of the forward pass with its arguments, and a call that computes a tensor from
parameters not used before starts a layer (those parameters), with a mark taken as it starts (a look at
a parameter's metadata, such as ``w.device``, is no use). This holds where modules use their weights
without calling their own ``forward`` (``nn.MultiheadAttention`` passes its projections' weights to one
functional call); a layer's forward time runs from its first call to the next layer's (the first layer
from the start of the iteration, the last to the end of the forward pass).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from commsched.errors import InputError
from commsched.runtime.profiling.step.target import Job, user_failure
from commsched.workload.profiling.records import GradientReady
from commsched.workload.profiling.timeline import ModuleTime

if TYPE_CHECKING:
    import torch


class Clock:
    """Marks on the host clock (CPU) or CUDA events (GPU), read as seconds after :meth:`sync`."""

    def __init__(self, device: str) -> None:
        self.cuda = device.startswith("cuda")

    def mark(self) -> Any:
        """A time mark now (a float on the CPU, a recorded CUDA event on a GPU)."""
        if not self.cuda:
            return time.perf_counter()
        import torch

        ev = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        ev.record()
        return ev

    def sync(self) -> None:
        """Wait for the GPU (no-op on the CPU)."""
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def seconds(self, a: Any, b: Any) -> float:
        """Seconds from mark ``a`` to mark ``b`` (after :meth:`sync`)."""
        if not self.cuda:
            return float(b - a)
        return float(a.elapsed_time(b)) / 1e3  # ms -> s


@dataclass(slots=True)
class Marks:
    """The marks of one iteration (filled by hooks while it runs)."""

    start: Any = None
    forward_end: Any = None
    grads: dict[int, Any] = field(default_factory=dict)
    uses: list[tuple[Any, tuple[int, ...]]] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Iteration:
    """One iteration's times, seconds."""

    forward_s: float
    backward_s: float
    ready_s: dict[int, float]
    layers: tuple[tuple[tuple[int, ...], float], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Params:
    """The parameters that get gradients: names and gradient bytes, each tensor once."""

    tensors: tuple[torch.nn.Parameter, ...]
    names: tuple[str, ...]
    size_bytes: tuple[int, ...]


def parameters(model: torch.nn.Module) -> Params:
    """Every distinct parameter with ``requires_grad`` (tied weights counted once), in model order."""
    seen: set[int] = set()
    tensors, names, sizes = [], [], []
    for name, p in model.named_parameters():
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            tensors.append(p)
            names.append(name)
            sizes.append(p.numel() * p.element_size())
    if not tensors:
        raise InputError(
            "the model has no trainable parameters", where="model", expected="parameters with grad"
        )
    return Params(tensors=tuple(tensors), names=tuple(names), size_bytes=tuple(sizes))


def frozen_parameters(model: torch.nn.Module) -> tuple[str, ...]:
    """Names of the parameters with ``requires_grad=False`` (each tensor once)."""
    seen: set[int] = set()
    out = []
    for name, p in model.named_parameters():
        if not p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            out.append(name)
    return tuple(out)


def _used(args: Any, ids: dict[int, int], seen: set[int]) -> tuple[int, ...]:
    """Indices of the parameters among ``args`` (and lists in them) not in ``seen``, in argument order."""
    out: list[int] = []
    for a in args:
        for x in a if isinstance(a, list | tuple) else (a,):
            k = ids.get(id(x))
            if k is not None and k not in seen and k not in out:
                out.append(k)
    return tuple(out)


def _computes(out: Any) -> bool:
    """Whether a call's result holds a tensor (a computation, not a look at metadata)."""
    import torch

    if isinstance(out, torch.Tensor):
        return True
    return isinstance(out, list | tuple) and any(isinstance(x, torch.Tensor) for x in out)


def _use_mode(params: Params, clock: Clock, marks: Marks) -> Any:
    """A ``TorchFunctionMode`` that marks every forward call using parameters for the first time."""
    from torch.overrides import TorchFunctionMode

    ids = {id(p): k for k, p in enumerate(params.tensors)}
    seen: set[int] = set()

    class _ParamUse(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
        ) -> Any:
            kwargs = kwargs or {}
            new = _used((*args, *kwargs.values()), ids, seen) if marks.forward_end is None else ()
            if not new:
                return func(*args, **kwargs)
            at = clock.mark()
            out = func(*args, **kwargs)
            if _computes(out):  # not a look at metadata (``w.device``, ``w.dim()``)
                seen.update(new)
                marks.uses.append((at, new))
            return out

    return _ParamUse()


@contextlib.contextmanager
def _hooks(job: Job, params: Params, clock: Clock, marks: Marks, *, layers: bool) -> Iterator[None]:
    handles: list[Any] = []

    def grad_hook(k: int) -> Callable[[Any], None]:
        return lambda _p: marks.grads.__setitem__(k, clock.mark())

    def on_forward_end(*_: Any) -> None:
        if job.step is not None and marks.forward_end is None:
            marks.forward_end = clock.mark()

    try:
        for k, p in enumerate(params.tensors):
            handles.append(p.register_post_accumulate_grad_hook(grad_hook(k)))  # type: ignore[no-untyped-call]
        handles.append(job.model.register_forward_hook(on_forward_end))
        with _use_mode(params, clock, marks) if layers else contextlib.nullcontext():
            yield
    finally:
        for h in handles:
            h.remove()


def _autocast(device: str, precision: str) -> contextlib.AbstractContextManager[Any]:
    import torch

    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16)


def _run(job: Job, clock: Clock, marks: Marks, cast: contextlib.AbstractContextManager[Any]) -> None:
    marks.start = clock.mark()
    if job.step is not None:
        with cast:
            job.step()
        return
    if job.loss_fn is None:
        raise InputError(
            "neither a step nor a loss function",
            where="job",
            expected="(model, step) or (model, batch, loss_fn)",
        )
    with cast:
        if isinstance(job.batch, tuple | list) and len(job.batch) == 2:
            loss = job.loss_fn(job.model(job.batch[0]), job.batch[1])
        else:
            loss = job.loss_fn(job.model(job.batch))
    marks.forward_end = clock.mark()
    loss.backward()


def run_iteration(
    job: Job, params: Params, settings: tuple[str, str], *, layers: bool, where: str
) -> Iteration:
    """Run one instrumented iteration and read its times (``settings`` = device, precision)."""
    device, precision = settings
    clock, marks = Clock(device), Marks()
    job.model.zero_grad(set_to_none=True)
    try:
        with _hooks(job, params, clock, marks, layers=layers):
            _run(job, clock, marks, _autocast(device, precision))
        clock.sync()
    except InputError:
        raise
    except Exception as exc:
        raise user_failure("the training step failed", exc, where) from None
    if marks.forward_end is None or not marks.grads:
        raise InputError(
            "the step ran no forward pass of the model and backward pass" if marks.forward_end is None
            else "no gradient was accumulated (the step must call backward)",
            where=where,
            expected="a step that runs the model forward, then backward",
        )  # fmt: skip
    ready = {k: clock.seconds(marks.forward_end, m) for k, m in marks.grads.items()}
    starts = [marks.start, *(m for m, _ in marks.uses[1:]), marks.forward_end]
    return Iteration(
        forward_s=clock.seconds(marks.start, marks.forward_end),
        backward_s=max(*ready.values(), 0.0),
        ready_s=ready,
        layers=tuple(
            (ks, clock.seconds(a, b)) for (_, ks), a, b in zip(marks.uses, starts, starts[1:], strict=False)
        ),
    )


def median_iteration(its: list[Iteration]) -> Iteration:
    """The per-layer and per-gradient medians of instrumented iterations with the same layers (the first
    iteration where they differ)."""
    first = its[0]
    same = [it for it in its if [ks for ks, _ in it.layers] == [ks for ks, _ in first.layers]]
    same = [it for it in same if it.ready_s.keys() == first.ready_s.keys()]
    return Iteration(
        forward_s=statistics.median(it.forward_s for it in same),
        backward_s=statistics.median(it.backward_s for it in same),
        ready_s={k: statistics.median(it.ready_s[k] for it in same) for k in first.ready_s},
        layers=tuple(
            (ks, statistics.median(it.layers[i][1] for it in same)) for i, (ks, _) in enumerate(first.layers)
        ),
    )


def _layer_name(names: list[str]) -> str:
    """The module that holds all of ``names`` (``enc.0.self_attn`` for its ``in_proj_weight`` and
    ``out_proj.weight``), or the one parameter's name where it has no module."""
    owners = [n.split(".")[:-1] for n in names]
    common: list[str] = []
    for parts in zip(*owners, strict=False):
        if len(set(parts)) > 1:
            break
        common.append(parts[0])
    return ".".join(common) or names[0]


def timeline(it: Iteration, params: Params) -> tuple[list[ModuleTime], list[GradientReady]]:
    """The instrumented iteration's layers (forward order, each with its parameters) and its gradients
    (in the order ready)."""
    modules: list[ModuleTime] = []
    for ks, s in it.layers:
        names = tuple(params.names[k] for k in ks)
        name = _layer_name(list(names))
        if modules and modules[-1].name == name:  # one module's parameters used by consecutive calls
            last = modules.pop()
            modules.append(
                ModuleTime(name=name, forward_s=last.forward_s + max(s, 0.0), params=last.params + names)
            )
            continue
        taken = {m.name for m in modules}
        unique = next(f"{name}#{n}" for n in range(2, len(taken) + 3) if f"{name}#{n}" not in taken)
        modules.append(
            ModuleTime(name=name if name not in taken else unique, forward_s=max(s, 0.0), params=names)
        )
    grads = sorted(
        (GradientReady(name=params.names[k], size_bytes=float(params.size_bytes[k]), ready_s=max(r, 0.0))
         for k, r in it.ready_s.items()),
        key=lambda g: g.ready_s,
    )  # fmt: skip
    return modules, grads
