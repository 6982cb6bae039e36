"""``commsched simulate`` and ``commsched validate``."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from commsched.cli.common import (
    check_out_dir,
    check_seed,
    placement_name,
    print_json,
    stderr_console,
    stdout_console,
    user_errors,
)
from commsched.errors import InputError, ValidationError

if TYPE_CHECKING:
    from commsched.io.scenario import Scenario


def _mode_value(mode: str | None) -> str | None:
    if mode is not None and mode not in ("exact", "fast"):
        raise InputError(f"unknown mode {mode!r}", where="--mode", expected="exact or fast")
    return mode


@user_errors
def simulate(
    scenario: Path = typer.Argument(..., help="Scenario YAML file, or the name of a shipped scenario."),
    policy: str | None = typer.Option(
        None, "--policy", "-p", help="Communication policy; default: the scenario's."
    ),
    mode: str | None = typer.Option(
        None, "--mode", "-m", help="exact (every iteration) or fast (steady states)."
    ),
    seed: int | None = typer.Option(None, "--seed", "-s", help="Seed of the run; default: the scenario's."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write summary.json and CSV time series here."),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object on stdout."),
    fluid_min_jobs: int | None = typer.Option(
        None,
        "--fluid-min-jobs",
        help="Fast mode: run components of at least N contending jobs at their fluid steady state "
        "(0: never); default: the scenario's fluid_min_jobs, else the engine's.",
        metavar="N",
    ),
) -> None:
    """Simulate a scenario and report GPU utilisation and per-job results."""
    from commsched.api import load_scenario
    from commsched.api import simulate as simulate_scenario
    from commsched.catalog import policy_registry
    from commsched.io.budget import check_run_budget
    from commsched.io.results import result_summary, write_outputs

    check_seed(seed)
    check_out_dir(out)
    run_mode = _mode_value(mode)
    if policy is not None:
        policy_registry().get(policy, where="--policy")  # unknown names name the option
    if fluid_min_jobs is not None and fluid_min_jobs < 0:
        raise InputError(f"{fluid_min_jobs}", where="--fluid-min-jobs", expected="an integer >= 0 (0: never)")
    sc = load_scenario(str(scenario))
    if fluid_min_jobs is not None:
        sc = replace(sc, fluid_min_jobs=fluid_min_jobs)
    check_run_budget(sc, run_mode or sc.mode)
    err = stderr_console()
    with Progress(
        TextColumn("[bold]simulating"),
        BarColumn(),
        TextColumn("{task.fields[t]:>10} / {task.total:.0f} s"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task("sim", total=sc.horizon_s, t="0")

        def progress(t: float) -> None:
            bar.update(task, completed=t, t=f"{t:.0f}")

        result = simulate_scenario(sc, policy=policy, mode=run_mode, seed=seed, progress=progress)
    placement = placement_name(sc, result.policy)
    summary = result_summary(result, scenario=sc.name, placement=placement)
    if out is not None:
        write_outputs(result, sc.topology, out, scenario=sc.name, placement=placement)
    if as_json:
        print_json(summary)
        return
    _print_table(summary)
    if out is not None:
        stdout_console().print(f"wrote {out}/summary.json, jobs.csv, utilization.csv, links.csv")


def _fmt(x: object, digits: int = 3) -> str:
    return "-" if x is None else (f"{x:.{digits}f}" if isinstance(x, float) else str(x))


def _count(x: float | None) -> str:
    """An iteration count: an integer as an integer, a fraction (a fast-mode credit) with one digit.

    Examples
    --------
    >>> _count(30.0), _count(12.5), _count(None)
    ('30', '12.5', '-')
    """
    if x is None or not math.isfinite(x):
        return "-"
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


def _print_table(summary: dict[str, object]) -> None:
    con = stdout_console()
    con.print(
        Text.assemble(
            "policy ",
            (str(summary["policy"]), "bold"),
            f" mode {summary['mode']} seed {summary['seed']}: GPU utilisation ",
            (_fmt(summary["gpu_utilization"]), "bold"),
            f" over {summary['cluster_gpus']} GPUs, "
            f"{_fmt(summary['allocated_gpu_utilization'])} over allocated GPUs; "
            f"{_fmt(summary['sim_time_s'], 1)} s simulated in {_fmt(summary['wall_time_s'], 2)} s",
        )
    )
    if summary["mode"] == "fast":
        con.print(
            f"fast mode: {_fmt(summary['extrapolated_job_fraction'], 3)} of the job-time extrapolated; "
            f"{summary['fast_checks']} checks ({summary['fast_checks_failed']} re-credited), worst "
            f"disagreement {_fmt(summary['worst_check_disagreement'], 3)}"
        )
    t = Table(show_header=True, header_style="bold")
    for col in (
        "job",
        "GPUs",
        "iterations",
        "standalone it. s",
        "ideal it. s",
        "mean it. s",
        "slowdown",
        "class",
        "JCT s",
        "wait s",
    ):
        t.add_column(col, justify="right")
    jobs = summary["jobs"]
    assert isinstance(jobs, list)
    for j in jobs:
        t.add_row(
            str(j["id"]),
            str(j["gpus"]),
            _count(j["iterations"]),
            _fmt(j["standalone_iteration_s"]),
            _fmt(j.get("ideal_iteration_s")),
            _fmt(j["mean_iteration_s"]),
            _fmt(j["slowdown"], 2),
            str(j["priority_class"]),
            _fmt(j["jct_s"], 1),
            _fmt(j["wait_s"], 1),
        )
    con.print(t)


@user_errors
def validate(
    scenario: Path = typer.Argument(..., help="Scenario YAML file, or the name of a shipped scenario."),
    as_json: bool = typer.Option(False, "--json", help="Print the problems as a JSON object."),
) -> None:
    """Check a scenario file and print every problem, one line each (exit 2 if any).

    Besides the file's form, the run it asks for is checked: an exact simulation that would need an
    absurd number of iterations is refused here as ``simulate`` would refuse it.
    """
    from commsched.io.budget import check_run_budget
    from commsched.io.shipped import resolve_scenario

    try:
        sc = resolve_scenario(str(scenario))
        check_run_budget(sc, sc.mode)
    except ValidationError as exc:
        if as_json:
            print_json({"valid": False, "problems": exc.problems})
            raise typer.Exit(2) from None
        raise
    except InputError as exc:
        if as_json:
            print_json({"valid": False, "problems": [exc.line()]})
            raise typer.Exit(2) from None
        raise
    asked = sum(j.spec.gpus for j in sc.jobs)
    gpus = sc.topology.n_gpus or asked  # a topology without hosts (single_link): the jobs' abstract GPUs
    notes = _notes(sc)
    if as_json:
        print_json(
            {
                "valid": True,
                "problems": [],
                "jobs": len(sc.jobs),
                "gpus": gpus,
                "job_gpus": asked,
                "notes": notes,
            }
        )
        return
    cluster = f"{gpus} GPUs" if sc.topology.n_gpus else f"no hosts, {gpus} abstract GPUs"
    stdout_console().print(
        f"{scenario}: OK — topology {sc.topology.name} ({cluster}), {_plural(len(sc.jobs), 'job')} on "
        f"{asked} GPUs, policy {sc.policy}, horizon {sc.horizon_s:g} s",
        soft_wrap=True,  # one line, whatever the width (logs and pipes read it whole)
    )
    for note in notes:
        stdout_console().print(f"note: {note}", soft_wrap=True)


def _notes(sc: Scenario) -> list[str]:
    """What a valid scenario does that its author may not expect."""
    out = []
    if sc.policy == "static" and sc.jobs and all(j.spec.priority is None for j in sc.jobs):
        out.append(
            "policy static with no job priority written: every job shares class 0 "
            "(give jobs a `priority`, 0 = highest, to rank them)"
        )
    return out


def _plural(n: int, word: str) -> str:
    """``1 job``, ``2 jobs``.

    Examples
    --------
    >>> _plural(1, "job"), _plural(2, "job"), _plural(0, "job")
    ('1 job', '2 jobs', '0 jobs')
    """
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)
    app.command("validate")(validate)
