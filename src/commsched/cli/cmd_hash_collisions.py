"""``commsched hash-collisions``: how often ECMP makes ring all-reduce flows share a link (vClos Fig. 2)."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.table import Table

from commsched.cli.common import (
    check_count,
    check_out_dir,
    check_seed,
    print_json,
    stdout_console,
    user_errors,
    write_json,
)
from commsched.errors import InputError


def _sizes(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(
            f"{text!r}", where="--sizes", expected="comma-separated GPU counts, e.g. 128,512"
        ) from None
    if not out:
        raise InputError("no size given", where="--sizes", expected="comma-separated GPU counts")
    return out


#: the most tasks per cluster size
MAX_TASKS = 100_000
#: the largest cluster size, in GPUs
MAX_GPUS = 131_072


@user_errors
def hash_collisions_cmd(
    sizes: str = typer.Option(
        "128,256,512,1024,2048", "--sizes", help="Cluster sizes in GPUs (multiples of 32)."
    ),
    tasks: int = typer.Option(100, "--tasks", help="Ring all-reduce tasks per size."),
    seed: int = typer.Option(0, "--seed", help="Seed of GPU orders and source ports."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    out: str | None = typer.Option(None, "--out", help="Directory for the JSON and the figure (PNG)."),
) -> None:
    """Distribution of flows sharing a link under 5-tuple MurmurHash3 ECMP, by cluster size (vClos §3.1)."""
    from commsched.experiments.hash_collisions import collision_table, collisions_json, plot_collisions

    check_count(tasks, "--tasks", hi=MAX_TASKS)
    check_seed(seed)
    for n in _sizes(sizes):
        check_count(n, "--sizes", hi=MAX_GPUS)
    check_out_dir(Path(out) if out is not None else None)
    stats = collision_table(_sizes(sizes), tasks=tasks, seed=seed)
    obj = collisions_json(stats)
    if out is not None:
        write_json(Path(out), "hash_collisions.json", obj)
        plot_collisions(stats, os.path.join(out, "hash_collisions.png"))
    if as_json:
        print_json(obj)
        return
    degrees = sorted({d for s in stats for d in s.counts})
    t = Table(
        title="flows sharing a link (% of cross-leaf flows), MurmurHash3 5-tuple ECMP", header_style="bold"
    )
    t.add_column("GPUs", justify="right")
    for d in degrees:
        t.add_column(f"{d}", justify="right")
    t.add_column("contended", justify="right")
    for s in stats:
        fr = s.fractions()
        t.add_row(str(s.size), *[f"{100 * fr.get(d, 0.0):.1f}" for d in degrees], f"{100 * s.contended:.1f}")
    stdout_console().print(t)


def register(app: typer.Typer) -> None:
    app.command("hash-collisions")(hash_collisions_cmd)
