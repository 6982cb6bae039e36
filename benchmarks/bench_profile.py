"""Benchmark: ``commsched profile``'s step time against an independent timing of the same step.

The independent measurement loads the same ``FILE.py:FUNCTION`` with ``importlib`` and times
``loss_fn(model(inputs), targets).backward()`` with nothing attached (no hooks, no per-parameter marks),
``time.perf_counter`` around it (a CUDA synchronisation before each reading on a GPU). Rounds alternate
the two (and which of them goes first), each on a freshly built job, so that drift of a shared machine
hits both alike;
each round's figure is a median over its timed iterations, and the medians over rounds are compared. A ratio
near 1 says the profiler's hooks and marks do not change the time they measure.

    .venv/bin/python benchmarks/bench_profile.py [--target FILE.py:FUNCTION] [--device cpu|cuda]
        [--precision fp32|bf16] [--rounds 5] [--iterations 10]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from commsched.runtime.profiling.step import StepSpec, profile_step
from commsched.runtime.profiling.step.target import build_job, load_function

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "tiny_mlp.py"


def independent_step_s(job: Any, *, device: str, precision: str, warmup: int, iterations: int) -> float:
    """Median forward + backward time of ``job`` with plain ``perf_counter`` readings, no instrumentation."""
    import torch

    cuda = device.startswith("cuda")
    cast: Any = (
        torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16)
        if precision == "bf16"
        else contextlib.nullcontext()
    )
    inputs, targets = job.batch
    times = []
    for k in range(warmup + iterations):
        job.model.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with cast:
            loss = job.loss_fn(job.model(inputs), targets)
        loss.backward()
        if cuda:
            torch.cuda.synchronize()
        if k >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--target", default=f"{EXAMPLE}:build", help="FILE.py:FUNCTION returning (model, batch, loss_fn)"
    )
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (CPU; 1: less noise)")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    spec = StepSpec(
        target=a.target, device=a.device, precision=a.precision, warmup=a.warmup, iterations=a.iterations
    )
    fn = load_function(a.target)
    prof: list[float] = []
    ind: list[float] = []
    for r in range(a.rounds):
        job = build_job(fn, device=a.device, where=a.target)  # a fresh job, as profile_step builds one
        if job.loss_fn is None:
            raise SystemExit("the benchmark needs a (model, batch, loss_fn) target")
        order = ("profile", "independent") if r % 2 == 0 else ("independent", "profile")  # alternate
        for which in order:
            if which == "profile":
                prof.append(profile_step(spec).compute_s)
            else:
                kw = {
                    "device": a.device,
                    "precision": a.precision,
                    "warmup": a.warmup,
                    "iterations": a.iterations,
                }
                ind.append(independent_step_s(job, **kw))
    p = profile_step(replace(spec, warmup=0, iterations=1))
    print(f"target {a.target} on {p.provenance.device_name}, {a.precision}, {a.threads} thread(s)")
    print(f"{a.rounds} alternated rounds x {a.iterations} timed iterations ({a.warmup} warm-up)")
    print(f"commsched profile: compute_s {_ms(prof)}")
    print(f"independent: step time {_ms(ind)}")
    print(f"ratio profile / independent: {statistics.median(prof) / statistics.median(ind):.3f}")


def _ms(values: list[float]) -> str:
    rounds = ", ".join(f"{x * 1e3:.2f}" for x in values)
    return f"median {statistics.median(values) * 1e3:.3f} ms (rounds: {rounds})"


if __name__ == "__main__":
    main()
