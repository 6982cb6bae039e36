"""``commsched intrajob MODEL``: per-layer iteration-time models of one job (Mercury §V, Fig. 11-12)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import typer
from rich.table import Table

from commsched.cli.common import (
    check_count,
    check_number,
    check_out_dir,
    option_names,
    print_json,
    stdout_console,
    user_errors,
    write_json,
)
from commsched.errors import InputError
from commsched.intrajob.iteration import CommPolicy, iteration_time, oracle_time
from commsched.intrajob.partitioned import PartitionConfig
from commsched.intrajob.problem import IterationProblem, problem_from_layers
from commsched.intrajob.sweep import (
    PolicyOptions,
    SweepResult,
    bandwidth_sweep,
    min_bandwidth,
    paper_target,
    policy_registry,
)
from commsched.workload.records import ModelProfile

ModelLookup = Callable[[str], ModelProfile]

GBPS = 1e9  # bits/s per Gb/s


def zoo_lookup(name: str) -> ModelProfile:
    """Look a model up in :mod:`commsched.workload.zoo` (imported lazily; absent -> InputError).

    A name that ends in ``.json`` is a profile file written by ``commsched profile``.
    """
    if name.endswith(".json"):
        from commsched.workload.profiling import read_profile_document

        return read_profile_document(name)
    try:
        zoo = importlib.import_module("commsched.workload.zoo")
    except ImportError:
        raise InputError(
            "the model zoo (commsched.workload.zoo) is not available", where="MODEL", expected="a zoo model"
        ) from None
    return cast(ModelProfile, zoo.get_model(name))


def _problem(lookup: ModelLookup, name: str) -> IterationProblem:
    profile = lookup(name)
    if not profile.layers:
        raise InputError(
            f"model {profile.name!r} has no per-layer profile", where="MODEL", expected="a model with layers"
        )
    return problem_from_layers(profile.layers, bandwidth_bps=GBPS)


#: the fastest link a sweep may reach, Gb/s (a petabit per second)
MAX_GBPS = 1e6


def _parse_sweep(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in text.split(":"))
    except ValueError:
        raise InputError(f"{text!r}", where="--sweep", expected="LO:HI in Gb/s, e.g. 1:100") from None
    if not 0 < lo < hi < MAX_GBPS:
        raise InputError(f"{text!r}", where="--sweep", expected=f"0 < LO < HI < {MAX_GBPS:g}")
    return lo, hi


def _single(
    problem: IterationProblem, policies: dict[str, CommPolicy], bandwidth_gbps: float
) -> dict[str, Any]:
    if not bandwidth_gbps > 0:
        raise InputError(f"{bandwidth_gbps!r}", where="--bandwidth-gbps", expected="> 0")
    p = problem.with_bandwidth(bandwidth_gbps * GBPS)
    oracle = oracle_time(p)
    out: dict[str, Any] = {}
    for name, pol in policies.items():
        t = iteration_time(p, pol)
        out[name] = {"iteration_s": t, "normalized_speed": oracle / t}
    return {"bandwidth_gbps": bandwidth_gbps, "oracle_s": oracle, "policies": out}


def _sweep(
    problem: IterationProblem, policies: dict[str, CommPolicy], grid_gbps: list[float], target: float
) -> dict[str, Any]:
    res = bandwidth_sweep(problem, [g * GBPS for g in grid_gbps], policies)
    out: dict[str, Any] = {}
    for name, pol in policies.items():
        # the oracle never communicates: it reaches any target at any bandwidth
        least = 0.0 if name == "oracle" else min_bandwidth(problem, pol, target=target)
        out[name] = {
            "iteration_s": list(res.iteration_s[name]),
            "normalized_speed": list(res.normalized_speed(name)),
            "min_bandwidth_gbps": None if least is None else least / GBPS,
        }
    merc, base = out["mercury"]["min_bandwidth_gbps"], out["wfbp"]["min_bandwidth_gbps"]
    return {
        "bandwidths_gbps": grid_gbps,
        "oracle_s": res.oracle_s,
        "target": target,
        "policies": out,
        "mercury_bandwidth_reduction_vs_wfbp": None if merc is None or base is None else 1 - merc / base,
        "_result": res,
    }


def _print_single(model: str, data: dict[str, Any]) -> None:
    table = Table(title=f"{model} at {data['bandwidth_gbps']:g} Gb/s (oracle {data['oracle_s']:.4f} s)")
    for col in ("policy", "iteration (s)", "t_oracle / t_iter"):
        table.add_column(col)
    for name, row in data["policies"].items():
        table.add_row(name, f"{row['iteration_s']:.4f}", f"{row['normalized_speed']:.3f}")
    stdout_console().print(table)


def _print_sweep(model: str, data: dict[str, Any]) -> None:
    names = list(data["policies"])
    grid = data["bandwidths_gbps"]
    speed = Table(title=f"{model}: normalised speed t_oracle / t_iter (Mercury Fig. 11)")
    speed.add_column("Gb/s")
    for n in names:
        speed.add_column(n)
    step = max(1, len(grid) // 12)
    for i in range(0, len(grid), step):
        speed.add_row(f"{grid[i]:.3g}", *(f"{data['policies'][n]['normalized_speed'][i]:.3f}" for n in names))
    least = Table(title=f"least bandwidth reaching {data['target']:.2f} of the oracle (Mercury Fig. 12)")
    least.add_column("policy")
    least.add_column("Gb/s")
    for n in names:
        v = data["policies"][n]["min_bandwidth_gbps"]
        least.add_row(n, "not reached" if v is None else f"{v:.3g}")
    console = stdout_console()
    console.print(speed)
    console.print(least)
    red = data["mercury_bandwidth_reduction_vs_wfbp"]
    if red is not None:
        console.print(f"Mercury needs {100 * red:.1f} % less bandwidth than WFBP")


def _stem(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", model)


def _plot(out: Path, model: str, res: SweepResult, data: dict[str, Any]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.asarray(res.bandwidths_bps) / GBPS
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in res.iteration_s:
        ax.plot(grid, res.normalized_speed(name), label=name)
    ax.set(xscale="log", xlabel="bandwidth (Gb/s)", ylabel="t_oracle / t_iter", title=model)
    ax.legend()
    speed_png = out / f"{_stem(model)}_normalized_speed.png"
    fig.savefig(speed_png, dpi=120, bbox_inches="tight")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    names = [n for n in data["policies"] if n != "oracle"]
    values = [data["policies"][n]["min_bandwidth_gbps"] or np.nan for n in names]
    ax.bar(names, values)
    ax.set(ylabel="least bandwidth (Gb/s)", title=f"{model}: reach {data['target']:.2f} of oracle")
    least_png = out / f"{_stem(model)}_min_bandwidth.png"
    fig.savefig(least_png, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return [speed_png, least_png]


#: the most bandwidths a sweep may visit
MAX_POINTS = 10_000


def register(app: typer.Typer, *, get_model: ModelLookup | None = None) -> None:
    """Add ``commsched intrajob`` to ``app`` (``get_model`` defaults to the model zoo)."""
    lookup = get_model or zoo_lookup

    @app.command("intrajob")
    @user_errors
    def intrajob(
        model: str = typer.Argument(
            ...,
            help="Zoo model, or a profile .json from `commsched profile` (needs a per-layer profile).",
        ),
        bandwidth_gbps: float | None = typer.Option(None, "--bandwidth-gbps", help="One bandwidth, Gb/s."),
        sweep: str | None = typer.Option(None, "--sweep", help="Bandwidth sweep LO:HI in Gb/s [1:200]."),
        points: int = typer.Option(40, "--points", min=2, help="Points of the sweep (geometric)."),
        target: float | None = typer.Option(None, "--target", help="Speed target [0.90 BERT, else 0.99]."),
        partition_mb: float = typer.Option(4.0, "--partition-mb", help="ByteScheduler partition, MB."),
        credit_mb: float = typer.Option(20.0, "--credit-mb", help="ByteScheduler credit, MB."),
        startup_ms: float = typer.Option(0.5, "--startup-ms", help="ByteScheduler startup per partition."),
        packet_kb: float = typer.Option(0.0, "--packet-kb", help="Mercury packet size, KB (0 = fluid)."),
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
        out: Path | None = typer.Option(None, "--out", help="Write JSON and plots to this directory."),
    ) -> None:
        """Iteration time of WFBP, ByteScheduler, Mercury (with/without preemption) and the oracle."""
        if bandwidth_gbps is not None and sweep is not None:
            raise InputError("both given", where="--bandwidth-gbps/--sweep", expected="one of them")
        check_count(points, "--points", lo=2, hi=MAX_POINTS)
        check_number(packet_kb, "--packet-kb")
        check_number(startup_ms, "--startup-ms")
        check_number(partition_mb, "--partition-mb", lo_open=True)
        check_number(credit_mb, "--credit-mb", lo_open=True)
        check_out_dir(out)
        names = {
            "bandwidth_bps": "--bandwidth-gbps" if bandwidth_gbps is not None else "--sweep",
            "target": "--target",
            "partition_bytes": "--partition-mb",
            "credit_bytes": "--credit-mb",
            "startup_s": "--startup-ms",
            "packet_bytes": "--packet-kb",
        }
        with option_names(**names):
            problem = _problem(lookup, model)
            cfg = PartitionConfig(
                partition_bytes=partition_mb * 1e6, credit_bytes=credit_mb * 1e6, startup_s=startup_ms * 1e-3
            )
            reg = policy_registry(PolicyOptions(bytescheduler=cfg, packet_bytes=packet_kb * 1e3))
            policies = {name: reg.get(name) for name in reg.names()}
            if bandwidth_gbps is not None:
                data = {"model": model, **_single(problem, policies, bandwidth_gbps)}
                _emit(data, json_out, out, lambda: _print_single(model, data))
                return
            lo, hi = _parse_sweep(sweep or "1:200")
            grid = [float(g) for g in np.geomspace(lo, hi, points)]
            swept = _sweep(problem, policies, grid, target if target is not None else paper_target(model))
        res = swept.pop("_result")
        data = {"model": model, **swept}
        _emit(data, json_out, out, lambda: _print_sweep(model, data))
        if out is not None:
            for png in _plot(out, model, res, data):
                if not json_out:
                    stdout_console().print(f"wrote {png}")


def _emit(data: dict[str, Any], json_out: bool, out: Path | None, show: Callable[[], None]) -> None:
    if out is not None:
        write_json(out, f"{_stem(data['model'])}_intrajob.json", data)
    if json_out:
        print_json(data)
    else:
        show()
