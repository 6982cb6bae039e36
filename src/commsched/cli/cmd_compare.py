"""``commsched compare``, ``commsched scenarios`` and ``commsched demo``."""

from __future__ import annotations

import importlib.util
import math
import os
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table
from rich.text import Text

from commsched.cli.common import check_out_dir, print_json, stderr_console, stdout_console, user_errors
from commsched.cli.report import gpu_time_table, headline, who_pays_table
from commsched.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console

    from commsched.io.scenario import Scenario
    from commsched.sim.results.comparison import Comparison

#: the most local worker processes ``--workers`` may start
MAX_WORKERS = 256
#: where ``commsched demo`` writes by default (its parent folders are made if missing)
DEMO_OUT = Path("out/demo")

#: the policies the demo compares (all main communication policies)
DEMO_POLICIES = ("ecmp-fair", "sincronia", "taccl-star", "cassini", "crux-pa", "crux-ps-pa", "crux-full")


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _table(obj: dict[str, object]) -> Table:
    t = Table(title=f"scenario {obj['scenario']}", header_style="bold")
    for col in (
        "policy",
        "GPU util",
        "alloc. util",
        "avg JCT s",
        "avg JRT s",
        "avg JWT s",
        "p95 loss",
        "max loss",
        "n>50%",
        "done",
        "wall s",
        "extrap.",
    ):
        if col == "policy":
            t.add_column(col, justify="left", no_wrap=True, min_width=12)
        else:
            t.add_column(col, justify="right")
    pols = obj["policies"]
    assert isinstance(pols, dict)
    best = max((v["gpu_utilization"] or 0.0 for v in pols.values()), default=0.0)
    groups = obj.get("ties") or []
    assert isinstance(groups, list)
    top: list[str] = next(
        (g for g in groups if any((pols[p]["gpu_utilization"] or 0.0) == best for p in g)), []
    )
    for name, v in pols.items():
        util = _fmt(v["gpu_utilization"])
        style = "bold" if (v["gpu_utilization"] or 0.0) == best or name in top else ""
        t.add_row(
            Text(name + (" =" if name in top else ""), style=style),
            Text(util, style=style),
            _fmt(v["allocated_gpu_utilization"]),
            _fmt(v["avg_jct_s"], 1),
            _fmt(v["avg_jrt_s"], 1),
            _fmt(v["avg_jwt_s"], 1),
            _fmt(v["throughput_loss"]["p95"], 3),
            _fmt(v["worst_throughput_loss"], 3),
            str(v["throughput_loss"]["over_50pct"]),
            f"{v['finished_jobs']}/{v['jobs']}",
            _fmt(v["wall_time_s"], 1),
            _fmt(v.get("extrapolated_job_fraction"), 2),
        )
    return t


#: what the columns of the comparison table mean (printed under it)
LEGEND = (
    "GPU util: busy GPU-seconds / (all GPUs x simulated time); alloc. util: the same over the GPUs "
    "allocated to jobs; '=' marks the policies tied with the best (within 0.0005). GPU time: useful "
    "(computing) GPU-hours in the window; lost: GPU-hours lost to communication against each job's ideal "
    "iteration (alone on the empty cluster, its flows spread); recovered: useful GPU-hours over the "
    "baseline (the first policy listed), per job size band too. avg JCT/JRT/JWT s: average job completion "
    "/ run / waiting time in seconds (JCT = JWT + JRT; finished jobs, JWT over started ones). p95 / max "
    "loss: 95th percentile / worst throughput loss of a job, 1 - ideal / contended iteration time (0 = as "
    "fast as its ideal). n>50%: jobs that lost more than half their throughput. done: finished / all jobs. "
    "wall s: seconds the simulation took. extrap.: fast mode, the share of the job-time extrapolated "
    "(compare.json also gives worst_check_disagreement, the worst rate disagreement the fast mode's checks "
    "saw)."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompareRequest:
    """What ``commsched compare`` (or ``demo``) was asked for, options as given."""

    scenario: str
    policies: tuple[str, ...]
    job_scheduler: str | None = None
    mode: str | None = None
    out: Path | None = None
    workers: int = 1
    ray: str | None = None
    as_json: bool = False


def _check(req: CompareRequest) -> None:
    """Every option checked before anything runs (unknown names, bad counts, a missing extra)."""
    from commsched.catalog import placement_registry, policy_registry

    if req.mode is not None and req.mode not in ("exact", "fast"):
        raise InputError(f"unknown mode {req.mode!r}", where="--mode", expected="exact or fast")
    if not 1 <= req.workers <= MAX_WORKERS:
        raise InputError(f"{req.workers} workers", where="--workers", expected=f"1 .. {MAX_WORKERS}")
    if not req.policies:
        raise InputError("no policy named", where="--policies", expected="comma-separated policy names")
    reg = policy_registry()
    for p in req.policies:
        reg.get(p, where="--policies")
    if req.job_scheduler is not None:
        placement_registry().get(req.job_scheduler, where="--job-scheduler")
    check_out_dir(req.out)
    if req.ray is not None and importlib.util.find_spec("ray") is None:
        raise InputError(
            "Ray is not installed", where="--ray", expected="pip install 'commsched[ray]' or omit --ray"
        )


def _warm_kernels(err: Console | None) -> None:
    """Compile the simulator's kernels (or load them from numba's cache) before any policy runs, so that
    no policy's wall time carries the compilation; its time is said apart on ``err``."""
    import time

    from commsched.sim.rates.flowkernel import warm_up

    t0 = time.perf_counter()
    if err is not None:
        err.print(
            "compiling the simulator's kernels (once per install; not counted in any policy's wall s)..."
        )
    warm_up()
    if err is not None:
        err.print(f"  kernels ready in {time.perf_counter() - t0:.1f} s")


def _simulate(req: CompareRequest, sc: Scenario) -> Comparison:
    """The comparison, with progress on stderr unless the output is JSON."""
    from commsched.api import compare

    err = stderr_console()
    _warm_kernels(None if req.as_json else err)
    if not req.as_json:
        where = f"on Ray ({req.ray})..." if req.ray is not None else f"with {req.workers} worker(s)..."
        err.print(
            f"comparing {len(req.policies)} policies on {sc.name} ({sc.topology.n_gpus} GPUs, "
            f"{len(sc.jobs)} jobs, {sc.horizon_s / 3600:.1f} h) {where}"
        )
    quiet = req.as_json or not err.is_terminal
    with nullcontext() if quiet else err.status("simulating", spinner="dots"):
        return compare(
            sc,
            list(req.policies),
            placement=req.job_scheduler,
            mode=req.mode,
            workers=req.workers,
            ray=req.ray,
            progress=None if req.as_json else (lambda p: err.print(f"  {p} done")),
        )


def _write(out: Path, obj: dict[str, Any], cmp: Comparison, sc: Scenario) -> None:
    import json

    from commsched.experiments.plots import write_plots
    from commsched.io.numbers import tidy
    from commsched.io.results import write_files

    write_files(out, {"compare.json": json.dumps(tidy(obj), indent=2, allow_nan=False) + "\n"})
    write_plots(cmp, sc.topology, out)


def run_compare(req: CompareRequest) -> None:
    """Check the options, run the comparison, write and print it (a table with its legend, or JSON)."""
    from commsched.api import load_scenario
    from commsched.io.budget import check_run_budget
    from commsched.sim.results.comparison import comparison_json, resolved

    _check(req)
    sc = load_scenario(req.scenario)
    check_run_budget(sc, req.mode or sc.mode)
    cmp = _simulate(req, sc)
    obj = resolved(comparison_json(cmp))  # figures to what the model resolves, no floating noise
    if req.out is not None:
        _write(req.out, obj, cmp, sc)
    if req.as_json:
        print_json(obj)
        return
    con = stdout_console()
    con.print(_table(obj))
    con.print(LEGEND, style="dim")
    con.print(gpu_time_table(obj))
    pays = who_pays_table(obj)
    if pays is not None:
        con.print(pays)
    line = headline(obj)
    if line is not None:
        con.print(line)
    if req.out is not None:
        con.print(
            f"wrote {req.out}/compare.json and plots (utilization, over time, JCT CDF, link intensity, loss, "
            "who pays)"
        )


def _split(policies: str) -> list[str]:
    return [p.strip() for p in policies.split(",") if p.strip()]


@user_errors
def compare_cmd(
    scenario: str = typer.Argument(
        ..., help="Scenario file, or the name of a shipped scenario (see `scenarios`)."
    ),
    policies: str = typer.Option(",".join(DEMO_POLICIES), "--policies", help="Comma-separated policy names."),
    job_scheduler: str | None = typer.Option(
        None,
        "--job-scheduler",
        help="Placement policy: pack, first-fit, hived or muri; default: the scenario's.",
    ),
    mode: str | None = typer.Option(None, "--mode", help="exact or fast; default: the scenario's."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write compare.json and plots here."),
    workers: int = typer.Option(1, "--workers", "-w", help="Local processes running policies in parallel."),
    ray: str | None = typer.Option(
        None, "--ray", help="Ray cluster address ('local' starts one) to spread policies."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object on stdout."),
) -> None:
    """Replay a scenario under several policies and compare GPU utilisation, JCT and fairness."""
    run_compare(
        CompareRequest(
            scenario=scenario,
            policies=tuple(_split(policies)),
            job_scheduler=job_scheduler,
            mode=mode,
            out=out,
            workers=workers,
            ray=ray,
            as_json=as_json,
        )
    )


@user_errors
def scenarios_cmd(as_json: bool = typer.Option(False, "--json", help="Print a JSON list.")) -> None:
    """List the scenarios shipped with commsched."""
    from commsched.io.shipped import shipped_description, shipped_names

    rows = [{"name": n, "description": shipped_description(n)} for n in shipped_names()]
    if as_json:
        print_json(rows)
        return
    t = Table(header_style="bold")
    t.add_column("scenario")
    t.add_column("description")
    for r in rows:
        t.add_row(r["name"], r["description"])
    stdout_console().print(t)


@user_errors
def demo_cmd(
    out: Path | None = typer.Option(DEMO_OUT, "--out", "-o", help="Where to write the JSON and plots."),
    workers: int = typer.Option(
        min(os.cpu_count() or 1, MAX_WORKERS), "--workers", "-w", help="Local processes."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object on stdout."),
) -> None:
    """Compare every main policy on the embedded default scenario (a synthetic Crux-like trace)."""
    run_compare(
        CompareRequest(scenario="demo", policies=DEMO_POLICIES, out=out, workers=workers, as_json=as_json)
    )


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_cmd)
    app.command("scenarios")(scenarios_cmd)
    app.command("demo")(demo_cmd)
