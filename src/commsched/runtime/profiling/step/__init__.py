"""``commsched profile SCRIPT.py:FUNCTION``: measure a user's PyTorch training step.

:func:`profile_step` loads the step (:mod:`~commsched.runtime.profiling.step.target`), runs warm-up and
timed iterations (:mod:`~commsched.runtime.profiling.step.measure`) and returns a
:class:`~commsched.workload.profiling.StepProfile`: the medians of forward and backward time, gradient
bytes, the gradient-ready timeline, per-layer times and the provenance (device, torch version, batch,
precision, date). ``torch`` is an optional extra, imported only when a step is measured.
"""

from __future__ import annotations

import datetime as dt
import platform
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from commsched.errors import InputError
from commsched.runtime.profiling.step.measure import (
    frozen_parameters,
    median_iteration,
    parameters,
    run_iteration,
    timeline,
)
from commsched.runtime.profiling.step.target import batch_size, build_job, load_function
from commsched.workload.profiling.quality import left_out_warnings, spread, spread_warnings
from commsched.workload.profiling.records import GradientReady, Provenance, StepProfile
from commsched.workload.profiling.timeline import layers_from_timeline

PRECISIONS = ("fp32", "bf16")
MAX_ITERATIONS = 10_000
#: instrumented iterations for the per-layer times (their medians are taken)
PROBES = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class StepSpec:
    """What to measure and how.

    Attributes
    ----------
    target
        ``FILE.py:FUNCTION`` or ``package.module:FUNCTION`` (see
        :mod:`~commsched.runtime.profiling.step.target`).
    device
        ``cpu`` or ``cuda`` (``cuda:N`` for another GPU).
    precision
        ``fp32``, or ``bf16`` (autocast to bfloat16; parameters and gradients stay fp32).
    warmup, iterations
        Untimed warm-up iterations, then timed iterations (the medians are reported).
    name
        The profile's name (default: the file's or module's name).
    batch_size
        Samples per iteration, recorded in the provenance (default: read from the batch where given).
    """

    target: str
    device: str = "cpu"
    precision: str = "fp32"
    warmup: int = 3
    iterations: int = 10
    name: str = ""
    batch_size: int | None = None


def _check(spec: StepSpec) -> None:
    import torch

    if spec.precision not in PRECISIONS:
        raise InputError(f"precision {spec.precision!r}", where="--precision", expected="fp32 or bf16")
    if not (spec.device in {"cpu", "cuda"} or spec.device.startswith("cuda:")):
        raise InputError(f"device {spec.device!r}", where="--device", expected="cpu, cuda or cuda:N")
    if spec.device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(
            "CUDA is not available here", where="--device", expected="cpu, or a machine with a GPU"
        )
    if spec.device.startswith("cuda:"):
        n, index = torch.cuda.device_count(), spec.device.removeprefix("cuda:")
        if not (index.isdigit() and int(index) < n):
            raise InputError(
                f"device {spec.device!r}: this machine has {n} CUDA device(s)",
                where="--device",
                expected=f"cuda:0 .. cuda:{n - 1}" if n > 0 else "cpu",
            )
    if not (0 <= spec.warmup <= MAX_ITERATIONS and 1 <= spec.iterations <= MAX_ITERATIONS):
        raise InputError(
            f"warm-up {spec.warmup}, iterations {spec.iterations}",
            where="--warmup/--iterations",
            expected=f"0 .. {MAX_ITERATIONS} warm-up and 1 .. {MAX_ITERATIONS} timed iterations",
        )


def device_name(device: str) -> str:
    """The GPU's name, or the CPU model as the system names it."""
    import torch

    if device.startswith("cuda"):
        return str(torch.cuda.get_device_name(torch.device(device)))
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return "CPU: " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU: " + (platform.processor() or platform.machine() or "unknown")


def _default_name(target: str) -> str:
    """The file's (or module's) name and the function's: ``tiny_mlp.build`` for
    ``docs/examples/tiny_mlp.py:build`` (two functions of one file get two names)."""
    module, _, func = target.rpartition(":")
    stem = Path(module).stem if module.endswith(".py") else module.rpartition(".")[2]
    return f"{stem}.{func}"


def _scaled(grads: list[GradientReady], backward_s: float) -> tuple[GradientReady, ...]:
    """Ready times scaled as the layers are, so that the last one is the median backward time."""
    peak = max((g.ready_s for g in grads), default=0.0)
    scale = backward_s / peak if peak > 0 and backward_s / peak != float("inf") else 1.0
    return tuple(replace(g, ready_s=g.ready_s * scale) for g in grads)


def _batch_size(spec: StepSpec, batch: object) -> int | None:
    """The batch's samples, or ``--batch-size`` where the batch does not say; both must agree."""
    seen = batch_size(batch)
    if spec.batch_size is not None and seen is not None and spec.batch_size != seen:
        raise InputError(
            f"--batch-size {spec.batch_size}, but the batch has {seen} samples",
            where="--batch-size",
            expected="the batch's own size, or no --batch-size",
        )
    return spec.batch_size or seen


def profile_step(spec: StepSpec) -> StepProfile:
    """Measure ``spec.target``'s training step (see the package documentation).

    Raises
    ------
    InputError
        A bad target or option, a step that fails, or one that runs no backward pass.
    """
    import torch

    _check(spec)
    fn = load_function(spec.target)
    job = build_job(fn, device=spec.device, where=spec.target)
    params = parameters(job.model)
    job.model.train()
    settings = (spec.device, spec.precision)
    for _ in range(spec.warmup):
        run_iteration(job, params, settings, layers=False, where=spec.target)
    timed = [
        run_iteration(job, params, settings, layers=False, where=spec.target) for _ in range(spec.iterations)
    ]
    probe = median_iteration(
        [
            run_iteration(job, params, settings, layers=True, where=spec.target)
            for _ in range(min(PROBES, spec.iterations))
        ]
    )
    fwd = statistics.median(t.forward_s for t in timed)
    bwd = statistics.median(t.backward_s for t in timed)
    modules, grads = timeline(probe, params)
    used = sorted(probe.ready_s)
    unused = tuple(params.names[k] for k in range(len(params.names)) if k not in probe.ready_s)
    frozen = frozen_parameters(job.model)
    fwd_all, bwd_all = tuple(t.forward_s for t in timed), tuple(t.backward_s for t in timed)
    return StepProfile(
        name=spec.name or _default_name(spec.target),
        forward_s=fwd,
        backward_s=bwd,
        sync_bytes=float(sum(params.size_bytes[k] for k in used)),
        layers=layers_from_timeline(modules, grads, forward_s=fwd, backward_s=bwd),
        gradients=_scaled(grads, bwd),
        forward_all=fwd_all,
        backward_all=bwd_all,
        params=sum(params.tensors[k].numel() for k in used),
        unused_params=unused,
        frozen_params=frozen,
        spread=spread(fwd_all, bwd_all),
        warnings=spread_warnings(fwd_all, bwd_all) + left_out_warnings(unused, frozen),
        provenance=Provenance(
            source=f"commsched profile {spec.target}",
            device="cuda" if spec.device.startswith("cuda") else "cpu",
            device_name=device_name(spec.device),
            precision=spec.precision,
            torch=str(torch.__version__),
            date=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            batch_size=_batch_size(spec, job.batch),
            warmup=spec.warmup,
            iterations=spec.iterations,
        ),
    )


__all__ = ["PRECISIONS", "StepSpec", "device_name", "profile_step"]
