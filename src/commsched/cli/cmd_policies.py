"""``commsched policies``: every communication policy, placement and queue order, one line each."""

from __future__ import annotations

import typer
from rich.table import Table

from commsched.cli.common import print_json, stdout_console, user_errors

#: one line per placement (job scheduler) policy
PLACEMENT_DESCRIPTIONS = {
    "pack": "best-fit locality packing: fewest hosts, then fewest ToRs (Crux's default)",
    "first-fit": "first free GPUs in host order (the trace's production scheduler)",
    "hived": "HiveD-like: buddy cells of a power-of-two size within the smallest enclosing switch",
    "muri": "Muri-like: interleave communication-heavy and compute-heavy jobs on the same links",
}

#: one line per order of the waiting queue
QUEUE_DESCRIPTIONS = {
    "fifo": "arrival order (default)",
    "sf": "smallest job first (fewest GPUs), ties by arrival (vClos evaluation)",
    "edf": "earliest deadline first: arrival + duration, jobs without a duration last (vClos evaluation)",
}


def policy_catalog() -> dict[str, list[dict[str, str]]]:
    """Every policy name the scenario files and ``--policy``/``--job-scheduler`` options accept.

    Returns
    -------
    dict
        ``policies`` (communication policies and vClos bundles), ``placements`` and ``queue_orders``,
        each a list of ``{"name": ..., "description": ...}``.
    """
    from commsched.catalog import placement_names, policy_registry, queue_registry

    pols = policy_registry()
    return {
        "policies": [{"name": n, "description": pols.get(n).description} for n in pols.names()],
        "placements": [
            {"name": n, "description": PLACEMENT_DESCRIPTIONS.get(n, "")} for n in placement_names()
        ],
        "queue_orders": [
            {"name": n, "description": QUEUE_DESCRIPTIONS.get(n, "")} for n in queue_registry().names()
        ],
    }


@user_errors
def policies_cmd(as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """List every communication policy, placement policy and queue order, one line each."""
    cat = policy_catalog()
    if as_json:
        print_json(cat)
        return
    t = Table(header_style="bold")
    t.add_column("kind")
    t.add_column("name", no_wrap=True)
    t.add_column("description")
    labels = {"policies": "policy", "placements": "placement", "queue_orders": "queue"}
    for family, rows in cat.items():
        for r in rows:
            t.add_row(labels[family], r["name"], r["description"])
    stdout_console().print(t)


def register(app: typer.Typer) -> None:
    app.command("policies")(policies_cmd)
