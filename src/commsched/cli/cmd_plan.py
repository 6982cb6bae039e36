"""``commsched plan``: print a policy's decisions for a scenario without simulating.

Placement: jobs with explicit GPUs keep them; the others are placed with the scenario's placement
policy in arrival order, as the simulator does at time 0 — only the jobs that arrive at time 0 are
planned, in strict FIFO order (the first job that does not fit stops placement, like the simulator's
queue without backfill). Jobs not planned are listed under ``waiting``.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from commsched.cli.common import check_seed, print_json, stdout_console, user_errors


def _placed_jobs(sc: Any) -> tuple[list[Any], list[str]]:
    from commsched.catalog import placement_registry
    from commsched.scheduling.interfaces import PlacementRequest
    from commsched.scheduling.state import PlacedJob

    place = placement_registry().get(sc.placement, where="placement")
    topo = sc.topology
    free = set(topo.gpus)
    placed: list[PlacedJob] = []
    waiting: list[str] = []
    for entry in sorted((j for j in sc.jobs), key=lambda j: j.spec.arrival_s):
        spec = entry.spec
        if spec.arrival_s > 0 or waiting:
            waiting.append(str(spec.id))
            continue
        if not topo.hosts:
            placed.append(PlacedJob(spec=spec, gpus=()))
            continue
        if entry.gpu_ids:
            gpus = tuple(entry.gpu_ids) if all(g in free for g in entry.gpu_ids) else None
            alloc = None
        else:
            req = PlacementRequest(topology=topo, job=spec, free_gpus=frozenset(free), running=tuple(placed))
            alloc = place(req)
            gpus = alloc.gpus if alloc is not None else None
        if gpus is None:
            waiting.append(str(spec.id))
            continue
        free.difference_update(gpus)
        if alloc is not None:
            placed.append(
                PlacedJob(
                    spec=spec,
                    gpus=gpus,
                    reserved_links=alloc.reserved_links,
                    pinned_routes=alloc.pinned_routes,
                )
            )
        else:
            placed.append(PlacedJob(spec=spec, gpus=gpus))
    return placed, waiting


def plan_json(sc: Any, policy: str, *, seed: int, hash_name: str) -> dict[str, Any]:
    """The decisions of ``policy`` for the scenario's time-0 jobs, as the ``--json`` object."""
    from commsched.errors import UnknownNameError
    from commsched.scheduling.dscp import default_dscp_table, dscp_for_level
    from commsched.scheduling.interfaces import PolicyContext
    from commsched.scheduling.paths import connection_ports
    from commsched.scheduling.policies import communication_plans
    from commsched.scheduling.routing import network_pair
    from commsched.scheduling.state import ClusterState
    from commsched.scheduling.traffic import job_connections

    plans = communication_plans()
    if policy not in plans:
        raise UnknownNameError("policy", policy, list(plans), where="--policy")
    jobs, waiting = _placed_jobs(sc)
    state = ClusterState(topology=sc.topology, jobs=tuple(jobs), priority_levels=sc.priority_levels)
    plan = plans[policy](state, PolicyContext(seed=seed, now_s=0.0, epoch=0))
    d = plan.decisions
    table = default_dscp_table()
    topo = sc.topology
    rows = []
    for j in jobs:
        cls = d.class_of(j.id)
        rows.append(
            {
                "id": str(j.id),
                "rank": d.ranking.get(j.id),
                "class": cls,
                "dscp": dscp_for_level(table, cls) if cls < table.levels else None,
                "intensity": plan.intensity.get(j.id),
                "k": plan.factor.get(j.id),
            }
        )
    routes = {key: d.route_of(key) for j in jobs for key in job_connections(topo, j)}
    ports = connection_ports(topo, routes, hash_name=hash_name) if topo.hosts else {}
    conns = []
    for key, index in routes.items():
        if topo.hosts:
            path = [str(n) for n in topo.gpu_route(key.src, key.dst, index).nodes]
        else:
            path = [str(key.src), str(key.dst)]
        pair = network_pair(topo, key)
        conns.append(
            {
                "job": str(key.job),
                "src": str(key.src),
                "dst": str(key.dst),
                "path": path,
                "src_port": ports.get(key) if pair is not None else None,
            }
        )
    out: dict[str, Any] = {"policy": policy, "hash": hash_name, "jobs": rows, "connections": conns}
    out["waiting"] = waiting
    shifts = {str(k): v for k, v in d.time_shift_s.items() if v}
    if shifts:
        out["time_shift_s"] = shifts
    return out


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

    check_seed(seed)
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
