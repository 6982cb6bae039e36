"""``commsched policies``: every communication policy, placement and queue order, one line each."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from commsched.cli.common import print_json, stdout_console, user_errors
from commsched.registry import Registry


def policy_catalog() -> dict[str, list[dict[str, Any]]]:
    """Every policy name the scenario files and ``--policy``/``--job-scheduler`` options accept.

    Returns
    -------
    dict
        ``policies`` (communication policies and vClos bundles), ``placements`` and ``queue_orders``,
        each a list of ``{"name": ..., "description": ..., "aliases": [...]}``, one entry per policy (its
        aliases are other names for it), the descriptions as registered with the policies.
    """
    from commsched.catalog import placement_registry, policy_registry, queue_registry

    pols = policy_registry()
    return {
        "policies": [_row(n, pols.get(n).description, pols.aliases(n)) for n in pols.names()],
        "placements": _rows(placement_registry()),
        "queue_orders": _rows(queue_registry()),
    }


def _row(name: str, description: str, aliases: tuple[str, ...]) -> dict[str, Any]:
    return {"name": name, "description": description, "aliases": list(aliases)}


def _rows(reg: Registry[Any]) -> list[dict[str, Any]]:
    return [_row(n, reg.description(n), reg.aliases(n)) for n in reg.names()]


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
            also = f" (also: {', '.join(r['aliases'])})" if r["aliases"] else ""
            t.add_row(labels[family], r["name"], r["description"] + also)
    stdout_console().print(t)


def register(app: typer.Typer) -> None:
    app.command("policies")(policies_cmd)
