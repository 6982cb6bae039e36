"""``commsched vclos-experiment``: vClos Table 5 and Figs. 12-13 on a Helios-like trace."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from commsched.cli.common import (
    check_count,
    check_number,
    check_out_dir,
    check_seed,
    print_json,
    stderr_console,
    stdout_console,
    user_errors,
    write_json,
)
from commsched.errors import InputError


def _floats(values: list[float] | None, default: float) -> tuple[float, ...]:
    out = tuple(values or (default,))
    if any(not math.isfinite(v) or v <= 0 for v in out):
        raise InputError(f"{list(out)}", where="--lambda", expected="positive mean gaps in seconds")
    return out


def _settings(values: list[str] | None) -> dict[str, object]:
    """``KEY=VALUE`` pairs (values parsed as YAML scalars or flow lists)."""
    from commsched.io.yamlio import load

    out: dict[str, object] = {}
    for item in values or ():
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"{item!r}", where="--set", expected="KEY=VALUE, e.g. median_duration_s=6000")
        out[key.strip()] = load(raw)
    return out


@user_errors
def vclos_experiment_cmd(
    scenario: str = typer.Argument(..., help="vclos-table5-512, vclos-2048, or a leaf-spine scenario file."),
    lambdas: list[float] | None = typer.Option(
        None, "--lambda", help="Mean arrival gap(s) in s (repeatable)."
    ),
    tasks: int | None = typer.Option(
        None, "--tasks", help="Tasks in the generated trace (default: the scenario's trace section)."
    ),
    policies: str = typer.Option(
        "best,ocs-vclos,vclos,sr,balanced-ecmp,ecmp", "--policies", help="Comma-separated policies."
    ),
    queue: str = typer.Option("fifo", "--queue", help="Queue order: fifo, sf or edf."),
    seed: int | None = typer.Option(None, "--seed", help="Trace seed (default: the scenario's)."),
    settings: list[str] | None = typer.Option(
        None, "--set", help="Override a helios_like trace parameter, KEY=VALUE (repeatable)."
    ),
    macro_iterations: int = typer.Option(
        10, "--macro-iterations", help="Simulated macro-iterations per job (events per job)."
    ),
    workers: int = typer.Option(1, "--workers", help="Parallel simulations (processes)."),
    ray: str | None = typer.Option(
        None, "--ray", help="Ray cluster address, or 'local' to start one (needs the `ray` extra)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    out: str | None = typer.Option(None, "--out", help="Directory for the JSON and figures."),
) -> None:
    """Replay a Helios-like trace per policy and lambda: average JCT (Table 5), JWT/queue/stability (Fig. 12)
    and JRT/JWT/JCT averages (Fig. 13)."""
    from commsched.catalog import queue_registry
    from commsched.experiments.vclos_experiment import (
        ExperimentSpec,
        experiment_json,
        plot_experiment,
        run_experiment,
        scenario_trace,
    )
    from commsched.io.limits import MAX_JOBS
    from commsched.io.shipped import resolve_scenario
    from commsched.io.traces import trace_jobs

    overrides = _settings(settings)
    check_count(tasks, "--tasks", hi=MAX_JOBS)
    check_count(workers, "--workers", hi=256)
    check_count(macro_iterations, "--macro-iterations", hi=10_000)
    check_seed(seed)
    for lam in lambdas or []:
        check_number(lam, "--lambda", lo_open=True)
    check_out_dir(Path(out) if out is not None else None)
    queue_registry().get(queue, where="--queue")
    names = _policy_names(policies)
    if tasks is not None:
        overrides["tasks"] = tasks
    if seed is not None:
        overrides["seed"] = seed
    trace, base_dir = scenario_trace(scenario)
    small = {**trace, **overrides, "tasks": 1}  # validates the section and overrides cheaply
    base = resolve_scenario(scenario)
    trace_jobs(small, base.topology, base_dir=base_dir)
    spec = ExperimentSpec(
        lambdas=_floats(lambdas, float(trace.get("mean_gap_s", 120.0))),
        policies=names,
        trace=trace,
        overrides=overrides,
        queue=queue,
        macro_iterations=macro_iterations,
        base_dir=base_dir,
    )
    err = stderr_console()
    runs = run_experiment(
        base,
        spec,
        workers=workers,
        ray_address=ray,
        progress=None
        if as_json
        else lambda r: err.print(f"{r.policy} lambda={r.mean_gap_s:g}: {r.wall_s:.1f} s"),
    )
    obj = experiment_json(base.name, runs)
    if out is not None:
        write_json(Path(out), "vclos_experiment.json", obj)
        plot_experiment(runs, out)
    if as_json:
        print_json(obj)
        return
    stdout_console().print(_table5(base.name, obj, spec.policies))


def _policy_names(policies: str) -> tuple[str, ...]:
    """The comma-separated ``--policies``, each checked against the registry."""
    from commsched.catalog import policy_registry

    names = tuple(p.strip() for p in policies.split(",") if p.strip())
    known = policy_registry()
    for p in names:
        known.get(p, where="--policies")
    return names


def _table5(name: str, obj: dict[str, Any], policies: tuple[str, ...]) -> Table:
    """The average JCT per lambda and policy (vClos Table 5)."""
    t = Table(title=f"{name}: avg JCT (s), Table 5", header_style="bold")
    t.add_column("lambda s", justify="right")
    for p in policies:
        t.add_column(p, justify="right")
    for lam, row in obj["table5_avg_jct_s"].items():
        t.add_row(lam, *["-" if row.get(p) is None else f"{row[p]:.1f}" for p in policies])
    return t


def register(app: typer.Typer) -> None:
    app.command("vclos-experiment")(vclos_experiment_cmd)
