"""``commsched testbed``: build a topology as Linux namespaces, probe it, measure it, tear it down."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer

from commsched.cli.common import print_json, stdout_console, user_errors
from commsched.errors import InputError

ROUTING_HELP = "ecmp (kernel multipath, default) | source-routing (vClos, leaf-spine) | pinned (--plan)"


def _out(lines: list[str]) -> None:
    con = stdout_console()
    for line in lines:
        con.print(line, markup=False, soft_wrap=True)


def _scenario(spec: str) -> tuple[Any, int]:
    """The topology and seed of a scenario (file or shipped name), or a topology YAML / kind name."""
    import yaml

    from commsched.cli.cmd_topology import load_topology
    from commsched.io import yamlio
    from commsched.io.shipped import shipped_names, shipped_text
    from commsched.topology import build_topology

    p = Path(spec)
    if spec in shipped_names() and not p.exists():
        text, where = shipped_text(spec), f"{spec} (shipped)"
    elif p.suffix.lower() in {".yaml", ".yml"}:
        try:
            text, where = p.read_text(encoding="utf-8"), str(p)
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", where=str(p)) from None
    else:
        return load_topology(spec, {}), 0
    try:
        data = yamlio.load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"cannot read YAML: {exc}", where=where) from None
    if not isinstance(data, dict):
        raise InputError("not a mapping", where=where, expected="a scenario or topology file")
    seed = int(data["seed"]) if isinstance(data.get("seed"), int) else 0
    topo = data.get("topology", data)
    if not isinstance(topo, dict) or "kind" not in topo:
        raise InputError("no topology kind", where=f"{where}: topology", expected="a mapping with 'kind'")
    params = {k: v for k, v in topo.items() if k != "kind"}
    return build_topology(str(topo["kind"]), params, where=f"{where}: topology"), seed


def _default_name(path: str) -> str:
    stem = "".join(ch for ch in Path(path).stem.lower() if ch.isalnum())
    return ("tb" + stem)[:16] if not stem[:1].isalpha() else stem[:16]


def _read_json_or_yaml(path: Path, where: str) -> Any:
    from commsched.io import yamlio

    try:
        return yamlio.load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", where=f"{where} {path}") from None


@user_errors
def up(
    scenario: str = typer.Argument(..., help="Scenario YAML (its topology), topology YAML or kind name."),
    name: str | None = typer.Option(None, "--name", "-n", help="Testbed name (prefix of everything)."),
    rate_scale: float | None = typer.Option(
        None, "--rate-scale", help="Link rate factor; default: fastest link -> 500 Mbit/s."
    ),
    routing: str = typer.Option("ecmp", "--routing", help=ROUTING_HELP),
    plan: Path | None = typer.Option(None, "--plan", help="'commsched plan --json' output (pinned routing)."),
    seed: int | None = typer.Option(None, "--seed", help="Multipath hash seed; default: the scenario's."),
) -> None:
    """Build the scenario's topology as namespaces, veth links, HTB queues and multipath routes."""
    from commsched.testbed import build
    from commsched.testbed.pinning import pins_from_plan
    from commsched.testbed.scale import default_rate_scale

    topo, sc_seed = _scenario(scenario)
    pins = []
    if plan is not None:
        if routing != "pinned":
            raise InputError(
                "--plan is only used with pinned routing", where="--plan", expected="--routing pinned"
            )
        pins = pins_from_plan(topo, _read_json_or_yaml(plan, "--plan"), where=str(plan))
    scale = default_rate_scale(topo) if rate_scale is None else rate_scale
    tb_name = name or _default_name(scenario)
    t0 = time.monotonic()
    state = build.up(
        topo,
        name=tb_name,
        rate_scale=scale,
        routing=routing,
        seed=sc_seed if seed is None else seed,
        pins=pins,
    )
    _out(
        [
            f"testbed {state.name} up in {time.monotonic() - t0:.1f} s: {len(topo.hosts)} hosts, "
            f"{len(state.namespaces)} namespaces, routing {state.routing}, rate scale {scale:.6g}",
            "intra-host links (NVLink/PCIe) are not emulated",
        ]
    )


@user_errors
def down(name: str = typer.Argument(..., help="Testbed name.")) -> None:
    """Remove a testbed: what its agents left (job processes, cgroups, nftables tables: their ledgers
    list them, after a crash or a clean stop), the namespaces it records, its state."""
    from commsched.runtime.launch.teardown import tear_down

    t0 = time.monotonic()
    gone = tear_down(name)
    made = gone.agents_made
    extra = f", {len(made)} processes, cgroups and tables of its agents" if made else ""
    took = time.monotonic() - t0
    _out([f"testbed {name} down in {took:.1f} s: {len(gone.namespaces)} namespaces removed{extra}"])


def _status(name: str) -> dict[str, Any]:
    from commsched.testbed import netns
    from commsched.testbed.handle import Testbed
    from commsched.testbed.state import read_state

    state = read_state(name)
    present = [ns for ns in state.namespaces if netns.exists(ns)]
    out: dict[str, Any] = {
        "name": state.name,
        "phase": state.phase,
        "routing": state.routing,
        "rate_scale": state.rate_scale,
        "seed": state.seed,
        "topology": state.topology,
        "namespaces": len(state.namespaces),
        "namespaces_present": len(present),
        "pinned_paths": len(state.pinned),
        "notes": list(state.notes),
    }
    if state.phase == "up":
        tb = Testbed(state)
        out["hosts"] = {
            str(h.id): {"namespace": tb.host_namespace(h.id), "nics": tb.host_addresses(h.id)}
            for h in tb.topology.hosts
        }
        out["emulated_links"] = len(tb.scaled_capacity_bps())
        out["links_not_emulated"] = len(tb.topology.links) - out["emulated_links"]
    return out


@user_errors
def status(
    name: str = typer.Argument(..., help="Testbed name."),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object on stdout."),
) -> None:
    """Show a testbed: phase, routing, rate scale, namespaces, hosts and their NIC addresses."""
    out = _status(name)
    if as_json:
        print_json(out)
        return
    lines = [
        f"testbed {out['name']}: {out['phase']}, routing {out['routing']}, "
        f"rate scale {out['rate_scale']:.6g}, topology {out['topology'].get('kind')}",
        f"  namespaces {out['namespaces_present']}/{out['namespaces']} present",
    ]
    if "hosts" in out:
        lines.append(
            f"  links emulated {out['emulated_links']}, not emulated (intra-host) {out['links_not_emulated']}"
        )
        for h, v in out["hosts"].items():
            lines.append(f"  {h}: {v['namespace']}  " + " ".join(f"{k}={a}" for k, a in v["nics"].items()))
    lines += [f"  note: {n}" for n in out["notes"]]
    _out(lines)


@user_errors
def list_() -> None:
    """List the testbeds that have a state file."""
    from commsched.testbed import build
    from commsched.testbed.state import read_state

    rows = []
    for n in build.names():
        st = read_state(n)
        rows.append(f"{n}  {st.phase}  {st.topology.get('kind')}  {st.routing}  scale {st.rate_scale:.6g}")
    _out(rows or ["no testbeds"])


@user_errors
def probe(
    name: str = typer.Argument(..., help="Testbed name."),
    dport: int = typer.Option(5201, "--dport", help="Destination port the source ports are found for."),
    pairs: int = typer.Option(256, "--pairs", help="Probe at most this many NIC pairs (seeded sample)."),
    verify: int = typer.Option(16, "--verify", help="Replay this many probed ports as real connections."),
    plan: Path | None = typer.Option(
        None, "--plan", help="'commsched plan --json' output: probe its pairs, give each connection its port."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object on stdout."),
) -> None:
    """Find a source port for every equal-cost path of (a sample of) NIC pairs; save them."""
    from commsched.testbed import netns
    from commsched.testbed.check import verify_ports
    from commsched.testbed.handle import Testbed

    netns.require_capability()
    tb = Testbed.load(name)
    t0 = time.monotonic()
    conns = None
    if plan is not None:
        conns = tb.plan_ports(_read_json_or_yaml(plan, "--plan"), dport=dport, where=str(plan))
        res = tb.probe_result()
    else:
        res = tb.probe(dport=dport, limit=pairs)
    took = time.monotonic() - t0
    ok, bad = verify_ports(tb, res, verify) if verify > 0 else (0, [])
    out = {
        "testbed": name,
        "dport": res.dport,
        "pairs": len(res.pairs),
        "ports_found": sum(len(p.ports) for p in res.pairs),
        "coverage": res.coverage,
        "unmodelled_paths": sum(len(p.unmodelled) for p in res.pairs),
        "probe_s": took,
        "verified": ok + len(bad),
        "verified_ok": ok,
        "mismatches": bad[:10],
    }
    if conns is not None:
        out["connections"] = conns
    if as_json:
        print_json(out)
        return
    _out(
        [
            f"probed {out['pairs']} NIC pairs in {took:.1f} s: {out['ports_found']} ports, coverage "
            f"{res.coverage:.1%}, {out['unmodelled_paths']} paths outside the model",
            f"replayed {out['verified']} as real connections: {ok} loaded exactly their predicted links",
            *[f"  mismatch: {m}" for m in bad[:10]],
            *[
                f"  plan connection {c['connection']} ({c['job']}) {c['src_nic']} -> {c['dst_nic']}: "
                f"source port {c['src_port']}"
                for c in conns or []
            ],
        ]
    )


@user_errors
def check(
    name: str = typer.Argument(..., help="Testbed name."),
    pairs: int = typer.Option(16, "--pairs", help="NIC pairs to probe and replay."),
    connections: int = typer.Option(48, "--connections", help="Probe ports replayed as real connections."),
    flow_s: float = typer.Option(2.0, "--flow-s", help="Seconds per shaping / priority flow."),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object on stdout."),
) -> None:
    """Real TCP flows: path prediction, shaping accuracy per link kind, strict-priority share."""
    from commsched.testbed import netns
    from commsched.testbed.check import CheckSettings, run_check
    from commsched.testbed.handle import Testbed

    netns.require_capability()
    if flow_s < 1.0:
        raise InputError(f"--flow-s {flow_s}", where="--flow-s", expected="at least 1 second")
    rep = run_check(Testbed.load(name), CheckSettings(pairs=pairs, connections=connections, flow_s=flow_s))
    if as_json:
        print_json(rep)
        return
    lines = [
        f"testbed {name}: path prediction {rep['path_prediction']:.1%} of {rep['path_connections']} "
        f"connections ({rep['probed_pairs']} pairs probed, coverage {rep['probe_coverage']:.1%})",
    ]
    for s in rep["shaping"]:
        lines.append(
            f"  shaping link {s['link']}: {s['measured_bps'] / 1e6:.1f} of {s['rate_bps'] / 1e6:.1f} Mbit/s "
            f"(error {s['error']:.1%})"
        )
    if "priority_high_share" in rep:
        lines.append(
            f"  strict priority on link {rep['priority_link']}: high class {rep['priority_high_share']:.1%}, "
            f"low class {rep['priority_low_share']:.1%} of the link"
        )
    _out(lines)


@user_errors
def rewire(
    name: str = typer.Argument(..., help="Testbed name (a leaf_spine with ocs: true)."),
    circuits: str = typer.Option(
        ..., "--circuits", help="circuits[leaf][uplink] = spine, as JSON/YAML text or a file."
    ),
) -> None:
    """Re-create the OCS circuits that change (OCS-vClos rewiring) and replace the routes."""
    from commsched.io import yamlio
    from commsched.testbed import build

    p = Path(circuits)
    data = _read_json_or_yaml(p, "--circuits") if p.is_file() else yamlio.load(circuits)
    if not isinstance(data, list):
        raise InputError("not a list of lists", where="--circuits", expected="[[spine, ...], ...] per leaf")
    t0 = time.monotonic()
    state = build.rewire(name, data)
    took = time.monotonic() - t0
    _out([f"testbed {name} rewired in {took:.2f} s: circuits {json.dumps(state.topology['circuits'])}"])


#: the ``commsched testbed`` group; modules that add testbed commands (for example a runtime's
#: ``testbed run``) register them here before the root app runs
testbed_app = typer.Typer(
    name="testbed",
    help="Emulated fabric: a topology as network namespaces, veth links, HTB queues (needs root).",
    no_args_is_help=True,
)
testbed_app.command("up")(up)
testbed_app.command("down")(down)
testbed_app.command("status")(status)
testbed_app.command("list")(list_)
testbed_app.command("probe")(probe)
testbed_app.command("check")(check)
testbed_app.command("rewire")(rewire)


def register(app: typer.Typer) -> None:
    """Add the ``testbed`` group to the root app."""
    app.add_typer(testbed_app)


def _register_run() -> None:
    from commsched.cli.cmd_testbed_run import run

    testbed_app.command("run")(run)


_register_run()
