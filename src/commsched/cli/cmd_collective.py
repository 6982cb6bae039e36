"""``commsched collective``: the exact step schedule of a collective algorithm."""

from __future__ import annotations

import functools
from typing import Any

import typer

from commsched.cli.common import (
    check_count,
    check_number,
    option_names,
    print_json,
    stdout_console,
    user_errors,
)
from commsched.errors import InputError
from commsched.workload.collectives import build_collective, collective_params, collective_registry
from commsched.workload.records import CollectiveSchedule

#: at most this many transfers per step are printed (the rest are summarised)
MAX_TRANSFERS_SHOWN = 16


#: the most ranks a schedule is built for (schedules grow with the square of the ranks)
MAX_RANKS = 4096


def parse_params(name: str, items: list[str]) -> dict[str, Any]:
    """Turn ``k=v`` strings into typed parameters of collective ``name`` (ints or booleans by default)."""
    defaults = collective_params(name)
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"bad parameter {item!r}", where="--param", expected="KEY=VALUE")
        if key not in defaults:
            exp = ", ".join(defaults) if defaults else "no parameters"
            raise InputError(
                f"unknown parameter {key!r} of collective {name!r}", where="--param", expected=exp
            )
        try:
            out[key] = int(value)
        except ValueError:
            raise InputError(
                f"{key}={value!r} is not an integer", where="--param", expected="KEY=INT"
            ) from None
        if not 0 <= out[key] <= MAX_RANKS:
            raise InputError(f"{key}={out[key]}", where="--param", expected=f"an integer in 0 .. {MAX_RANKS}")
    return out


def schedule_json(s: CollectiveSchedule, *, max_transfers: int | None) -> dict[str, Any]:
    """JSON object of a schedule: steps with repeat counts and (possibly truncated) transfers."""
    steps = []
    for st in s.steps:
        shown = st.transfers if max_transfers is None else st.transfers[:max_transfers]
        steps.append(
            {
                "label": st.label,
                "repeat": st.repeat,
                "n_transfers": len(st.transfers),
                "transfers": [{"src": t.src, "dst": t.dst, "size_bytes": t.size_bytes} for t in shown],
                "truncated": len(shown) < len(st.transfers),
            }
        )
    return {
        "algorithm": s.algorithm,
        "ranks": s.ranks,
        "servers": s.servers,
        "size_bytes": s.size_bytes,
        "n_steps": s.n_steps,
        "steps": steps,
        "sent_bytes": list(s.sent_bytes()),
        "received_bytes": list(s.received_bytes()),
    }


PARAM_OPTION = typer.Option(None, "--param", "-p", help="Algorithm parameter KEY=VALUE (repeatable).")


@user_errors
def collective_command(
    algorithm: str = typer.Argument(..., help="Algorithm: " + ", ".join(collective_registry().names())),
    *,
    ranks: int = typer.Option(..., "--ranks", "-n", help="Number of ranks (workers)."),
    size_bytes: float = typer.Option(..., "--bytes", "-m", help="Message size M in bytes."),
    param: list[str] | None = PARAM_OPTION,
    json_out: bool = typer.Option(False, "--json", help="Print the schedule as JSON."),
    full: bool = typer.Option(False, "--full", help="Do not truncate the transfers of large steps."),
) -> None:
    """Print the per-step transfer schedule of a collective and the bytes each rank sends and receives."""
    collective_registry().get(algorithm, where="ALGORITHM")
    check_count(ranks, "--ranks", hi=MAX_RANKS)
    check_number(size_bytes, "--bytes")
    with option_names(ranks="--ranks", size_bytes="--bytes"):
        sched = build_collective(
            algorithm, ranks=ranks, size_bytes=size_bytes, **parse_params(algorithm, param or [])
        )
    limit = None if full else MAX_TRANSFERS_SHOWN
    doc = schedule_json(sched, max_transfers=limit)
    if json_out:
        print_json(doc)
        return
    con = stdout_console()
    out = functools.partial(con.print, markup=False)
    out(
        f"{sched.algorithm}: {sched.ranks} ranks"
        + (f" + {sched.servers} servers" if sched.servers else "")
        + f", {sched.size_bytes:g} bytes, {len(sched.steps)} distinct steps, {sched.n_steps} steps in all"
    )
    for i, st in enumerate(doc["steps"]):
        out(f"step {i} [{st['label']}] x{st['repeat']}: {st['n_transfers']} transfers")
        for t in st["transfers"]:
            out(f"  {t['src']} -> {t['dst']}: {t['size_bytes']:g} B")
        if st["truncated"]:
            out(f"  ... {st['n_transfers'] - len(st['transfers'])} more (use --full or --json --full)")
    out("rank: sent bytes / received bytes")
    for r, (snt, rcv) in enumerate(zip(doc["sent_bytes"], doc["received_bytes"], strict=True)):
        if limit is not None and r >= limit:
            out(f"  ... {len(doc['sent_bytes']) - limit} more endpoints")
            break
        kind = "server " if r >= sched.ranks else ""
        out(f"  {kind}{r}: {snt:g} / {rcv:g}")


def register(app: typer.Typer) -> None:
    """Add ``commsched collective`` to ``app``."""
    app.command("collective")(collective_command)
