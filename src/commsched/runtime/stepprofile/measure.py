"""Timing a training step with PyTorch: forward, backward, per-module forward, gradient-ready times.

One iteration: gradients are cleared (``set_to_none``), the step runs, and marks are taken at its start,
at the end of the forward pass (after the loss for ``(model, batch, loss_fn)``; at the model's forward
post-hook for ``(model, step)``) and in ``register_post_accumulate_grad_hook`` of every parameter. The
backward time runs from the end of the forward pass to the last gradient accumulated. On a GPU the marks
are CUDA events recorded on the current stream (read after a synchronisation); on a CPU they are
``time.perf_counter`` readings. Timed iterations carry only those hooks; one further instrumented
iteration adds forward pre/post hooks on every leaf module with parameters for the per-layer times.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from commsched.errors import InputError
from commsched.runtime.stepprofile.target import Job, user_failure
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
    modules: dict[str, list[Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Iteration:
    """One iteration's times, seconds."""

    forward_s: float
    backward_s: float
    ready_s: dict[int, float]
    module_s: dict[str, float]


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


def leaf_modules(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """Leaf modules that own parameters (the layers), in registration order."""
    return [
        (name, m) for name, m in model.named_modules()
        if not any(True for _ in m.children()) and any(True for _ in m.parameters(recurse=False))
    ]  # fmt: skip


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
        if layers:
            for name, m in leaf_modules(job.model):
                handles.append(
                    m.register_forward_pre_hook(
                        lambda *_, n=name: marks.modules.setdefault(n, []).append(clock.mark())
                    )
                )
                handles.append(
                    m.register_forward_hook(lambda *_, n=name: marks.modules[n].append(clock.mark()))
                )
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
    module_s = {
        n: sum(clock.seconds(a, b) for a, b in zip(ms[::2], ms[1::2], strict=False))
        for n, ms in marks.modules.items()
    }
    return Iteration(
        forward_s=clock.seconds(marks.start, marks.forward_end),
        backward_s=max(*ready.values(), 0.0),
        ready_s=ready,
        module_s=module_s,
    )


def timeline(it: Iteration, params: Params) -> tuple[list[ModuleTime], list[GradientReady]]:
    """The instrumented iteration's modules (forward order) and gradients (in the order ready)."""
    modules = [ModuleTime(name=n, forward_s=max(s, 0.0)) for n, s in it.module_s.items()]
    grads = sorted(
        (GradientReady(name=params.names[k], size_bytes=float(params.size_bytes[k]), ready_s=max(r, 0.0))
         for k, r in it.ready_s.items()),
        key=lambda g: g.ready_s,
    )  # fmt: skip
    return modules, grads
