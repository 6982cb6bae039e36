"""``commsched plan``: print a policy's decisions for a scenario without simulating.

The decisions come from :func:`commsched.api.plan` (which documents the time-0 placement rule);
this module only prints them.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from commsched.cli.common import check_seed, print_json, stdout_console, user_errors


def plan_json(sc: Any, policy: str, *, seed: int, hash_name: str) -> dict[str, Any]:
    """The decisions of ``policy`` for the scenario's time-0 jobs, as the ``--json`` object."""
    from commsched.api import plan as plan_decisions
    from commsched.api import plan_json as report_json
    from commsched.catalog import policy_registry

    policy_registry().get(policy, where="--policy")  # unknown names name the option
    return report_json(plan_decisions(sc, policy, seed=seed), hash_name=hash_name)


@user_errors
def plan(
    scenario: str = typer.Argument(..., help="Scenario YAML file, or the name of a shipped scenario."),
    policy: str | None = typer.Option(
        None, "--policy", "-p", help="Communication policy; default: the scenario's."
    ),
    seed: int | None = typer.Option(None, "--seed", "-s", help="Seed; default: the scenario's."),
    hash_name: str = typer.Option("murmur3", "--hash", help="ECMP hash the source ports are computed for."),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object on stdout."),
) -> None:
    """Print a policy's decisions (ranks, classes, DSCP, paths, source ports) without simulating."""
    from commsched.io.shipped import resolve_scenario
    from commsched.topology import hash_functions

    check_seed(seed)
    hash_functions().get(hash_name, where="--hash")  # checked even where no port is computed
    sc = resolve_scenario(scenario)
    out = plan_json(sc, policy or sc.policy, seed=sc.seed if seed is None else seed, hash_name=hash_name)
    if as_json:
        print_json(out)
        return
    t = Table(show_header=True, header_style="bold", title=f"policy {out['policy']}")
    for col in ("job", "rank", "class", "DSCP", "intensity", "k"):
        t.add_column(col, justify="right")
    for j in out["jobs"]:
        t.add_row(
            j["id"],
            "-" if j["rank"] is None else str(j["rank"]),
            str(j["class"]),
            "-" if j["dscp"] is None else str(j["dscp"]),
            "-" if j["intensity"] is None else f"{j['intensity']:.3g}",
            "-" if j["k"] is None else f"{j['k']:.3g}",
        )
    con = stdout_console()
    con.print(t)
    net = [c for c in out["connections"] if c["src_port"] is not None]
    con.print(f"{len(out['connections'])} connections, {len(net)} across the network (see --json for paths)")
    if out["waiting"]:
        con.print("not planned (arrive later or do not fit at time 0): " + ", ".join(out["waiting"]))


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
