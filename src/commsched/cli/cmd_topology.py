"""``commsched topology show``: build a topology and print what it contains."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.table import Table

from commsched.cli.common import print_json, stdout_console, user_errors
from commsched.errors import InputError, TopologyError
from commsched.io import yamlio
from commsched.io.limits import non_finite, slow_rates, topology_size
from commsched.topology.builders import build_topology, load_lingjun_topo
from commsched.topology.graph import Topology
from commsched.topology.summary import TopologySummary, summarize


def _parse_params(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"bad parameter {item!r}", where="--param", expected="KEY=VALUE")
        try:
            out[key.strip()] = yamlio.load(raw)
        except yaml.YAMLError:
            out[key.strip()] = raw
    return out


def _from_yaml(path: Path, extra: dict[str, Any]) -> Topology:
    text = yamlio.read_text(path, what="a topology YAML file")
    try:
        data = yamlio.load(text)
    except yaml.YAMLError as exc:
        raise yamlio.input_error(exc, str(path)) from None
    if isinstance(data, dict) and isinstance(data.get("topology"), dict):
        data = data["topology"]
    if not isinstance(data, dict) or "kind" not in data:
        raise InputError("no topology kind", where=str(path), expected="a mapping with 'kind' and parameters")
    params = {k: v for k, v in data.items() if k != "kind"} | extra
    return _build(str(data["kind"]), params, where=f"{path}: topology")


def _build(kind: str, params: dict[str, Any], *, where: str) -> Topology:
    """Build after the checks that need no building: finite numbers, a fabric of a sane size."""
    for path in non_finite(params):
        raise InputError(
            "not a finite number", where=f"{where}." + ".".join(map(str, path)), expected="a finite number"
        )
    size = topology_size(params, kind)
    if size is not None:
        raise InputError(size[1], where=f"{where}.{size[0]}", expected=size[2])
    for k in slow_rates(params):
        raise InputError(f"{params[k]!r} bit/s", where=f"{where}.{k}", expected="at least 1 bit/s")
    try:
        return build_topology(kind, params, where=where)
    except TopologyError as exc:  # parameters that describe no consistent fabric: the user's to fix
        raise InputError(
            str(exc), where=where, expected="consistent parameters (see `topology params`)"
        ) from None


def load_topology(spec: str, params: dict[str, Any]) -> Topology:
    """A topology from a kind name, a Lingjun ``.csv`` file or a YAML file with ``kind`` and parameters."""
    path = Path(spec)
    if path.suffix.lower() == ".csv":
        yamlio.check_file(path, what="a Lingjun topo.csv file")
        return load_lingjun_topo(path, **params) if params else load_lingjun_topo(path)
    if path.suffix.lower() in {".yaml", ".yml"}:
        return _from_yaml(path, params)
    return _build(spec, params, where="topology")


def _print(summary: TopologySummary) -> None:
    con = stdout_console()
    con.print(f"topology {summary.name}", markup=False, soft_wrap=True)
    con.print(
        f"  hosts {summary.hosts}   GPUs {summary.gpus}   NICs {summary.nics}", markup=False, soft_wrap=True
    )
    con.print(
        "  nodes by kind: " + ", ".join(f"{k} {v}" for k, v in summary.nodes_by_kind.items()),
        markup=False,
        soft_wrap=True,
    )
    con.print(
        "  links by kind: " + ", ".join(f"{k} {v}" for k, v in summary.links_by_kind.items()),
        markup=False,
        soft_wrap=True,
    )
    over = "n/a" if summary.oversubscription is None else f"{summary.oversubscription:.3g}:1"
    con.print(f"  ToR oversubscription (worst): {over}", markup=False, soft_wrap=True)
    for s in summary.path_samples:
        con.print(
            f"  equal-cost paths {s.src} -> {s.dst} ({s.relation}): {s.n_paths}", markup=False, soft_wrap=True
        )


def _plain(text: str) -> str:
    """A docstring's reStructuredText markup as plain text (for the terminal and JSON).

    Examples
    --------
    >>> _plain("Host ``h`` (see :func:`commsched.topology.hosts.host_templates`, :class:`~a.B`)")
    'Host h (see commsched.topology.hosts.host_templates, B)'
    """
    import re

    text = re.sub(r":[a-z]+:`~[\w.]*?\.?(\w+)`", r"\1", text)
    text = re.sub(r":[a-z]+:`([^`]+)`", r"\1", text)
    return re.sub(r"``([^`]+)``", r"\1", text)


def _parameter_docs(doc: str) -> dict[str, str]:
    """Parameter name -> description from a numpydoc ``Parameters`` section (names may be grouped)."""
    lines = inspect.cleandoc(doc).splitlines()
    out: dict[str, str] = {}
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == "Parameters") + 2
    except StopIteration:
        return out
    names: list[str] = []
    for ln in lines[start:]:
        if ln and not ln[0].isspace():
            if set(ln.strip()) <= {"-"} or ln.strip() in ("Returns", "Raises", "Examples", "Notes"):
                break
            names = [n.strip() for n in ln.split(":")[0].split(",")]
            continue
        if ln.strip():
            for n in names:
                out[n] = (out.get(n, "") + " " + ln.strip()).strip()
    return out


def topology_parameters(kind: str) -> list[dict[str, Any]]:
    """Every parameter of a topology kind: name, default (``None``: derived), type and description."""
    from commsched.topology.builders import topology_builders

    builder = topology_builders().get(kind, where="KIND")
    docs = _parameter_docs(builder.__doc__ or "")
    rows: list[dict[str, Any]] = []
    for name, p in inspect.signature(builder).parameters.items():
        default = None if p.default is inspect.Parameter.empty else p.default
        rows.append(
            {
                "name": name,
                "required": p.default is inspect.Parameter.empty,
                "default": default if isinstance(default, int | float | str | bool) else None,
                "type": str(p.annotation).replace("HostTemplate", "template"),
                "description": _plain(docs.get(name, "")),
            }
        )
    return rows


def register(app: typer.Typer) -> None:
    """Add the ``topology`` sub-app to the root app."""
    sub = typer.Typer(help="Build and inspect cluster topologies.", no_args_is_help=True)

    @sub.command("show")
    @user_errors
    def show(
        spec: Annotated[str, typer.Argument(help="A topology kind, a Lingjun topo.csv, or a YAML file.")],
        param: Annotated[
            list[str] | None, typer.Option("--param", "-p", help="Builder parameter KEY=VALUE (repeatable).")
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="Print one JSON object instead of text.")
        ] = False,
    ) -> None:
        """Print hosts, GPUs, switches and links by kind, oversubscription and equal-cost path counts."""
        summary = summarize(load_topology(spec, _parse_params(param or [])))
        if as_json:
            print_json(summary.to_dict())
        else:
            _print(summary)

    @sub.command("params")
    @user_errors
    def params(
        kind: Annotated[str, typer.Argument(help="A topology kind (see `topology params --help`).")],
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    ) -> None:
        """List the parameters of a topology kind: name, default, type and meaning (scenario files
        give them in the ``topology`` section, ``topology show`` as ``-p KEY=VALUE``)."""
        rows = topology_parameters(kind)
        if as_json:
            print_json({"kind": kind, "parameters": rows})
            return
        t = Table(title=f"topology kind {kind}", header_style="bold")
        for col in ("parameter", "default", "type", "meaning"):
            t.add_column(col, no_wrap=col == "parameter")
        for r in rows:
            default = "(required)" if r["required"] else ("derived" if r["default"] is None else r["default"])
            t.add_row(r["name"], str(default), r["type"], r["description"])
        stdout_console().print(t)

    app.add_typer(sub, name="topology")
