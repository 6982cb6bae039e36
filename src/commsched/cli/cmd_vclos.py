"""``commsched vclos-experiment``: vClos Table 5 and Figs. 12-13 on a Helios-like trace."""

from __future__ import annotations

import json
import math
import os

import typer
from rich.table import Table

from commsched.cli.common import print_json, stderr_console, stdout_console, user_errors
from commsched.errors import InputError


def _floats(values: list[float] | None) -> tuple[float, ...]:
    out = tuple(values or (120.0,))
    if any(not math.isfinite(v) or v <= 0 for v in out):
        raise InputError(f"{list(out)}", where="--lambda", expected="positive mean gaps in seconds")
    return out


@user_errors
def vclos_experiment_cmd(
    scenario: str = typer.Argument(..., help="vclos-table5-512, vclos-2048, or a leaf-spine scenario file."),
    lambdas: list[float] | None = typer.Option(
        None, "--lambda", help="Mean arrival gap(s) in s (repeatable)."
    ),
    tasks: int = typer.Option(5000, "--tasks", help="Tasks in the generated trace."),
    policies: str = typer.Option(
        "best,ocs-vclos,vclos,sr,balanced-ecmp,ecmp", "--policies", help="Comma-separated policies."
    ),
    queue: str = typer.Option("fifo", "--queue", help="Queue order: fifo, sf or edf."),
    seed: int = typer.Option(0, "--seed", help="Trace seed."),
    workers: int = typer.Option(1, "--workers", help="Parallel simulations (processes)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    out: str | None = typer.Option(None, "--out", help="Directory for the JSON and figures."),
) -> None:
    """Replay a Helios-like trace per policy and lambda: average JCT (Table 5), JWT/queue/stability (Fig. 12)
    and JRT/JWT/JCT averages (Fig. 13)."""
    from commsched.experiments.vclos_exp import (
        ExperimentSpec,
        experiment_json,
        plot_experiment,
        run_experiment,
    )
    from commsched.io.shipped import resolve_scenario

    if tasks < 1:
        raise InputError(f"{tasks}", where="--tasks", expected=">= 1")
    base = resolve_scenario(scenario)
    spec = ExperimentSpec(
        lambdas=_floats(lambdas),
        policies=tuple(p.strip() for p in policies.split(",") if p.strip()),
        tasks=tasks,
        seed=seed,
        queue=queue,
    )
    err = stderr_console()
    runs = run_experiment(
        base,
        spec,
        workers=workers,
        progress=None
        if as_json
        else lambda r: err.print(f"{r.policy} lambda={r.mean_gap_s:g}: {r.wall_s:.1f} s"),
    )
    obj = experiment_json(base.name, runs)
    if out is not None:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "vclos_experiment.json"), "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=2)
        plot_experiment(runs, out)
    if as_json:
        print_json(obj)
        return
    t = Table(title=f"{base.name}: avg JCT (s), Table 5", header_style="bold")
    t.add_column("lambda s", justify="right")
    for p in spec.policies:
        t.add_column(p, justify="right")
    for lam, row in obj["table5_avg_jct_s"].items():
        t.add_row(lam, *["-" if row.get(p) is None else f"{row[p]:.1f}" for p in spec.policies])
    stdout_console().print(t)


def register(app: typer.Typer) -> None:
    app.command("vclos-experiment")(vclos_experiment_cmd)
