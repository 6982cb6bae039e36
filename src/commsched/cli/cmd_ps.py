"""``commsched ps``: the parameter-server runtime (BytePS summation, Mercury packets) from the command line.

* ``commsched ps launch``: run this process's role from ``DMLC_*`` / ``torchrun`` variables, or a whole
  job on loopback (``--local-workers N``) running ``CMD`` as each worker.
* ``commsched ps transports``: the registered transports and what each does.
* ``commsched ps bench MODEL``: each transport's measured iteration time on a shaped link beside the
  ``commsched intrajob`` model twin (``--dynamic``: the rate changes during the run).
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import AbstractContextManager
from typing import Any

import typer

from commsched.cli.cmd_intrajob import zoo_lookup
from commsched.cli.common import print_json, stdout_console, user_errors
from commsched.errors import InputError

GBPS = 1e9  # bits/s per Gb/s

ps_app = typer.Typer(help="Parameter-server runtime: BytePS summation service and Mercury transport.")


def _transports(text: str) -> list[Any]:
    from commsched.runtime.ps.transports import TransportConfig, transport_registry

    known = transport_registry().names()
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in known]
    if not names or bad:
        raise InputError(f"{text!r}", where="--transports", expected="a list of " + ", ".join(known))
    return [TransportConfig.named(n) for n in names]


@ps_app.command("transports")
@user_errors
def transports_list(
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """List the PS transports (the registry ``--transports`` takes its names from)."""
    from commsched.runtime.ps.transports import transport_registry

    reg = transport_registry()
    kinds = [reg.get(n) for n in reg.names()]
    if json_out:
        print_json({k.name: {"description": k.description, "prioritized": k.prioritized, "packets": k.packets,
                             "credit": k.credit} for k in kinds})  # fmt: skip
        return
    for k in kinds:
        stdout_console().print(f"{k.name:<14} {k.description}", markup=False, highlight=False)


def _link(loopback: bool, rate_bps: float, workers: int = 1) -> AbstractContextManager[Any]:
    from contextlib import nullcontext

    from commsched.testbed.fabric import shaped_link
    from commsched.testbed.shaped_link import LoopbackLink

    return nullcontext(LoopbackLink()) if loopback else shaped_link(rate_bps, workers=workers)


@ps_app.command("bench")
@user_errors
def bench(
    model: str = typer.Argument(..., help="Zoo model with a per-layer profile (vgg16, resnet50, ...)."),
    bandwidth_gbps: float = typer.Option(1.0, "--bandwidth-gbps", help="Shaped link rate, Gb/s."),
    transports: str = typer.Option("fifo,bytescheduler,mercury", "--transports", help="Comma list."),
    workers: int = typer.Option(2, "--workers", min=1, help="Workers (they share the link)."),
    servers: int = typer.Option(1, "--servers", min=1, help="Servers."),
    byte_scale: float = typer.Option(0.25, "--byte-scale", help="Gradient bytes x this (compute kept)."),
    iterations: int = typer.Option(4, "--iterations", min=1, help="Measured iterations per transport."),
    loopback: bool = typer.Option(False, "--loopback", help="Unshaped loopback instead of a shaped link."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Measure each transport on VGG-16/ResNet-50 layer profiles beside the model's prediction."""
    from commsched.experiments.ps.bench import JobSpec, compare_transports, emulated_layers

    if not (bandwidth_gbps > 0 and 0 < byte_scale <= 1):
        raise InputError(f"{bandwidth_gbps}, {byte_scale}", where="--bandwidth-gbps/--byte-scale",
                         expected="bandwidth > 0 and 0 < scale <= 1")  # fmt: skip
    profile = zoo_lookup(model)
    if not profile.layers:
        raise InputError(
            f"model {model!r} has no per-layer profile", where="MODEL", expected="a zoo model with layers"
        )
    spec = JobSpec(layers=emulated_layers(profile.layers, byte_scale=byte_scale), num_workers=workers,
                   num_servers=servers, iterations=iterations)  # fmt: skip
    with _link(loopback, bandwidth_gbps * GBPS, workers) as link:
        goodput, results = compare_transports(link, _transports(transports), spec)
    out = {
        "model": model, "bandwidth_gbps": bandwidth_gbps, "workers": workers, "servers": servers,
        "byte_scale": byte_scale, "goodput_gbps_per_worker": goodput / GBPS,
        "transports": {r.transport: {"iteration_s": r.iteration_s,
                                     "predicted_iteration_s": r.predicted_iteration_s,
                                     "max_abs_error": r.max_abs_error, "series_s": list(r.series_s)}
                       for r in results},
    }  # fmt: skip
    if json_out:
        print_json(out)
        return
    console = stdout_console()
    console.print(
        f"{model} x{byte_scale} bytes, {workers} workers, goodput {goodput / GBPS:.3f} Gb/s per worker"
    )
    for r in results:
        console.print(_bench_line(r.transport, r.iteration_s, r.predicted_iteration_s, r.max_abs_error))


#: what ``max_abs_error`` measures, said where it is printed
SUM_ERROR = "largest |summed gradient - NumPy's sum|"


def _bench_line(transport: str, measured_s: float, predicted_s: float, max_abs_error: float) -> str:
    """One transport's line of ``ps bench``.

    Examples
    --------
    >>> print(_bench_line("mercury", 1.1, 1.0, 3e-7).split("(+10.0%)  ")[1])
    largest |summed gradient - NumPy's sum| 3e-07
    """
    gap = measured_s / predicted_s - 1
    return (
        f"  {transport:14s} measured {measured_s:.3f} s  model {predicted_s:.3f} s  ({gap:+.1%})"
        f"  {SUM_ERROR} {max_abs_error:.2g}"
    )


@ps_app.command("dynamic")
@user_errors
def dynamic(
    model: str = typer.Argument(..., help="Zoo model with a per-layer profile."),
    bandwidth_gbps: float = typer.Option(1.0, "--bandwidth-gbps", help="First (and highest) level, Gb/s."),
    levels: str = typer.Option("1,0.316,0.1", "--levels", help="Levels as fractions of the first."),
    period_s: float = typer.Option(3.0, "--period-s", help="Seconds between rate changes."),
    workers: int = typer.Option(2, "--workers", min=1),
    byte_scale: float = typer.Option(
        0.02,
        "--byte-scale",
        help="Gradient bytes x this (0.02: compute-bound at the first level, where the tuned knobs matter).",
    ),
    iterations: int = typer.Option(
        16,
        "--iterations",
        min=1,
        help="Iterations per dynamic run (16 cover the default 9-s cycle of levels about twice).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """ByteScheduler (tuned at the first level) against Mercury while the link rate changes.

    Also runs both at the fixed first level (static) and reports Mercury's advantage
    ``mean(ByteScheduler) / mean(Mercury) - 1`` in both runs.
    """
    from commsched.experiments.ps.bench import JobSpec, emulated_layers
    from commsched.experiments.ps.dynamic import dynamic_comparison, mean_s
    from commsched.testbed.fabric import shaped_link

    fractions = _level_fractions(levels, period_s)
    profile = zoo_lookup(model)
    spec = JobSpec(layers=emulated_layers(profile.layers, byte_scale=byte_scale), num_workers=workers,
                   iterations=iterations)  # fmt: skip
    rates = [f * bandwidth_gbps * GBPS for f in fractions]
    with shaped_link(rates[0], workers=workers) as link:
        cmp = dynamic_comparison(link, spec, levels_bps=rates, period_s=period_s)

    def runs(pair: Any) -> dict[str, Any]:
        return {r.transport: {"mean_iteration_s": mean_s(r), "series_s": list(r.iteration_s),
                              "started_s": list(r.started_s), "max_abs_error": r.max_abs_error}
                for r in pair}  # fmt: skip

    dyn = runs(d.run for d in cmp.dynamic)
    for d in cmp.dynamic:
        dyn[d.run.transport].update({
            "levels_gbps": [r / GBPS for r in d.levels()],
            "balanced_mean_iteration_s": d.balanced_mean_s(cmp.common_levels),
            "per_level_mean_s": {f"{r / GBPS:g}": m for r, m in d.per_level_mean_s().items()},
        })  # fmt: skip

    out = {
        "model": model, "levels_gbps": [r / GBPS for r in rates], "period_s": period_s,
        "bytescheduler_tuning": [{"partition_bytes": p, "credit_bytes": c, "iteration_s": t}
                                 for p, c, t in cmp.tuned.points],
        "bytescheduler_pick": {"partition_bytes": cmp.tuned.config.partition_bytes,
                               "credit_bytes": cmp.tuned.config.credit_bytes},
        "transports": dyn,
        "static_first_level": runs(cmp.static),
        "mercury_gap_dynamic": cmp.dynamic_gap, "mercury_gap_static": cmp.static_gap,
        "mercury_gap_dynamic_balanced": cmp.balanced_gap,
        "common_levels_gbps": [r / GBPS for r in cmp.common_levels],
        "holds": cmp.holds,
    }  # fmt: skip
    if json_out:
        print_json(out)
        return
    _print_dynamic(cmp, rates[0])


def _level_fractions(levels: str, period_s: float) -> list[float]:
    """``--levels`` as fractions of the first level (checked with ``--period-s``)."""
    try:
        fractions = [float(x) for x in levels.split(",")]
    except ValueError:
        raise InputError(
            f"{levels!r}", where="--levels", expected="comma-separated numbers, e.g. 1,0.316,0.1"
        ) from None
    if not fractions or min(fractions) <= 0 or period_s <= 0:
        raise InputError(f"{levels!r}, {period_s}", where="--levels/--period-s",
                         expected="positive fractions and a positive period")  # fmt: skip
    return fractions


def _print_dynamic(cmp: Any, first_bps: float) -> None:
    """The text form of ``ps dynamic``: the tuning pick, each run, and the verdict."""
    from commsched.experiments.ps.dynamic import mean_s

    console = stdout_console()
    pick = cmp.tuned.config
    console.print(f"bytescheduler tuned at {first_bps / GBPS:g} Gb/s: partition {pick.partition_bytes} B, "
                  f"credit {pick.credit_bytes} B")  # fmt: skip
    for r in cmp.static:
        console.print(f"static   {r.transport:14s} mean {mean_s(r):.3f} s  series "
                      + " ".join(f"{t:.2f}" for t in r.iteration_s))  # fmt: skip
    for d in cmp.dynamic:
        per = ", ".join(f"{k / GBPS:g} Gb/s {v:.2f}" for k, v in d.per_level_mean_s().items())
        console.print(f"dynamic  {d.run.transport:14s} mean {mean_s(d.run):.3f} s  balanced "
                      f"{d.balanced_mean_s(cmp.common_levels):.3f} s  per level: {per}")  # fmt: skip
    verdict = "holds" if cmp.holds else "does not hold"
    console.print(f"Mercury's advantage: static {cmp.static_gap:+.1%}, dynamic {cmp.dynamic_gap:+.1%} "
                  f"(level-balanced {cmp.balanced_gap:+.1%}): {verdict}")  # fmt: skip


@ps_app.command("versus-ring")
@user_errors
def versus_ring_cmd(
    workers: int = typer.Option(4, "--workers", min=2, help="Worker (GPU) hosts n."),
    cpu_machines: int = typer.Option(2, "--cpu-machines", min=1, help="CPU-only hosts k."),
    bandwidth_gbps: float = typer.Option(0.2, "--bandwidth-gbps", min=0.001, help="Every NIC's rate."),
    mbytes: float = typer.Option(16.0, "--mbytes", min=0.001, help="Model bytes per iteration, MB."),
    tensors: int = typer.Option(200, "--tensors", min=1, help="Equal tensors the model is cut into."),
    iterations: int = typer.Option(5, "--iterations", min=1),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    pace: bool = typer.Option(
        True, "--pace-by-share/--no-pace-by-share", help="Pace each BytePS connection by its NIC byte share."
    ),
) -> None:
    """BytePS with k CPU machines against the ring all-reduce on the same hosts (root), with the model."""
    from commsched.experiments.ps.versus_ring import VersusSpec, versus_ring

    spec = VersusSpec(workers=workers, cpu_machines=cpu_machines, model_bytes=round(mbytes * 1e6),
                      tensors=tensors, iterations=iterations, pacing=pace)  # fmt: skip
    out: dict[str, Any] = versus_ring(spec, rate_bps=bandwidth_gbps * GBPS).summary()
    if json_out:
        print_json(out)
        return
    console = stdout_console()
    console.print(f"n={workers} k={cpu_machines}, {mbytes:g} MB, NIC goodput {out['goodput_gbps']:.3f} Gb/s, "
                  f"CPU servers' share {out['cpu_share']:.3f}, paced by share: {out['paced']}")  # fmt: skip
    for name in ("byteps", "allreduce"):
        r = out[name]
        console.print(f"{name:10s} median {r['median_iteration_s']:.3f} s "
                      f"(model {r['predicted_iteration_s']:.3f} s), "
                      f"{SUM_ERROR} {r['max_abs_error']:.1e}")  # fmt: skip
    console.print(f"speed-up over all-reduce: measured {out['measured_speedup']:.3f}, commsched byteps "
                  f"{out['predicted_speedup']:.3f} "
                  f"(this split {out['predicted_speedup_this_split']:.3f})")  # fmt: skip


@ps_app.command("launch", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@user_errors
def launch(
    ctx: typer.Context,
    local_workers: int = typer.Option(0, "--local-workers", min=0, help="Run a whole job on loopback."),
    servers: int = typer.Option(1, "--servers", min=1, help="Servers of a --local-workers job."),
    transport: str = typer.Option("", "--transport", help="fifo | bytescheduler | p3 | mercury."),
) -> None:
    """Run this process's role (DMLC_ROLE / torchrun env), or a loopback job: launch --local-workers N CMD."""
    from commsched.runtime.ps.launch import local_job_env, run_role
    from commsched.runtime.ps.roles import role_from_env

    cmd = list(ctx.args)
    if transport:
        _transports(transport)
        os.environ["COMMSCHED_PS_TRANSPORT"] = transport
    if local_workers == 0:
        env = role_from_env()
        if env.role == "worker":
            if not cmd:
                raise InputError(
                    "no command for the worker role", where="CMD", expected="the training command"
                )
            raise typer.Exit(subprocess.call(cmd))
        run_role(env)
        return
    if not cmd:
        raise InputError("no command", where="CMD", expected="the training command each worker runs")
    raise typer.Exit(_local_job(cmd, local_workers, servers, local_job_env))


def _local_job(cmd: list[str], workers: int, servers: int, job_env: Any) -> int:
    import socket

    with socket.socket() as probe:  # a free port for the scheduler, looked up (not fixed)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    py = [sys.executable, "-m", "commsched.runtime.ps", "role"]
    procs = []
    try:
        for role, n in (("scheduler", 1), ("server", servers)):
            for _ in range(n):
                env = {
                    **os.environ,
                    **job_env(role=role, port=port, num_workers=workers, num_servers=servers),
                }
                procs.append(subprocess.Popen(py, env=env))
        ws = []
        for rank in range(workers):
            env = {**os.environ, **job_env(role="worker", port=port, num_workers=workers, num_servers=servers,
                                            rank=rank)}  # fmt: skip
            ws.append(subprocess.Popen(cmd, env=env))
        codes = [w.wait() for w in ws]
        return max(codes, key=abs)
    finally:
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def register(app: typer.Typer) -> None:
    """Add ``commsched ps`` to the command line."""
    app.add_typer(ps_app, name="ps")
