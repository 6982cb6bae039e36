"""``commsched microbench``: Crux's optimality microbenchmark (Crux §4.4, Fig. 16)."""

from __future__ import annotations

import typer
from rich.table import Table

from commsched.cli.common import (
    check_count,
    check_seed,
    print_json,
    stderr_console,
    stdout_console,
    user_errors,
)


@user_errors
def microbench(
    cases: int = typer.Option(20, "--cases", "-n", help="Number of random cases."),
    seed: int = typer.Option(0, "--seed", "-s", help="Seed of the case generator."),
    workers: int = typer.Option(1, "--workers", "-w", help="Local worker processes (joblib)."),
    ray: str | None = typer.Option(
        None, "--ray", help="Ray cluster address, or 'local' to start one (needs the `ray` extra)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object on stdout."),
) -> None:
    """Score Crux's path selection, priority assignment and compression against the enumerated optimum."""
    from commsched.experiments.microbench import run_microbench, summarise

    check_count(cases, "--cases", hi=100_000)
    check_count(workers, "--workers", hi=256)
    check_seed(seed)
    err = stderr_console()
    summary = summarise(
        run_microbench(
            cases,
            seed,
            workers=workers,
            ray_address=ray,
            progress=None if as_json else (lambda i, r: err.print(f"case {i} done ({r.wall_s:.1f} s)")),
        )
    )
    if as_json:
        print_json(summary.as_json())
        return
    t = Table(show_header=True, header_style="bold", title=f"{summary.cases} cases: fraction of optimal")
    for col in ("mechanism", "method", "mean", "p5"):
        t.add_column(col, justify="right")
    for mech, methods in summary.mechanisms.items():
        for name, stats in methods.items():
            t.add_row(mech, name, f"{stats['mean']:.4f}", f"{stats['p5']:.4f}")
    stdout_console().print(t)


def register(app: typer.Typer) -> None:
    app.command("microbench")(microbench)
