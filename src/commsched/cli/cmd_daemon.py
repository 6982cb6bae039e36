"""``commsched daemon`` (the scheduling daemon) and ``commsched agent`` (a host agent).

Both need the ``runtime`` extra (``pip install 'commsched[runtime]'``: FastAPI, uvicorn, httpx). Each
prints one line ``listening on URL`` on stdout once its socket is bound (useful with port 0), then
serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from commsched.cli.common import read_token, user_errors
from commsched.errors import InputError

if TYPE_CHECKING:
    from commsched.runtime.protocol.control_json import NicJSON


def _need_runtime() -> None:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise InputError(
            f"the runtime extra is not installed ({exc.name} missing)",
            where="commsched daemon/agent",
            expected="pip install 'commsched[runtime]'",
        ) from None


def _params(items: list[str]) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"bad parameter {item!r}", where="--param", expected="KEY=VALUE")
        out[key] = yaml.safe_load(value)
    return out


def _announce(url: str) -> None:
    sys.stdout.write(f"listening on {url}\n")
    sys.stdout.flush()


@user_errors
def daemon(
    db: Path = typer.Option(
        ..., "--db", help="SQLite state file (created when missing; resumed when present)."
    ),
    listen: str = typer.Option(
        "127.0.0.1:0", "--listen", help="HOST:PORT or unix:PATH (port 0: any free one)."
    ),
    token_file: Path | None = typer.Option(
        None, "--token-file", help="Bearer token for mutating calls (default: DB.token, made on first start)."
    ),
    policy: str = typer.Option("crux-full", "--policy", help="Communication policy (commsched policies)."),
    topology: str | None = typer.Option(None, "--topology", help="Topology kind, e.g. crux_testbed."),
    param: list[str] = typer.Option([], "--param", "-p", help="Topology parameter KEY=VALUE (repeatable)."),
    levels: int = typer.Option(8, "--priority-levels", min=1, max=8, help="Hardware priority classes."),
    placement: str = typer.Option("pack", "--placement", help="Placement for jobs given as a GPU count."),
    hash_name: str = typer.Option("murmur3", "--hash", help="ECMP hash of the model source ports."),
    seed: int = typer.Option(0, "--seed", help="Seed of the policy's random choices."),
    window: float = typer.Option(
        30.0, "--profiling-window", min=0, help="Top-class profiling window, s (0: off)."
    ),
    heartbeat: float = typer.Option(
        10.0, "--heartbeat-timeout", min=0, help="Remove jobs silent this long, s (0: never)."
    ),
) -> None:
    """Run the scheduling daemon: HTTP API + status page, SQLite state, recompute on every job event.

    The options after --token-file configure a new database; a database that already holds a
    configuration keeps it (a restart changes no decision), and the configuration can be changed
    with PUT /v1/cluster.
    """
    _need_runtime()
    from commsched.runtime.daemon import ClusterConfig, DaemonService, Store
    from commsched.runtime.daemon.api import create_app
    from commsched.runtime.http.serving import bind, load_token, parse_listen, serve

    where = parse_listen(listen)
    if topology is None and param:
        raise InputError("--param given without --topology", where="--param", expected="--topology KIND")
    topo = {"kind": topology, **_params(param)} if topology else {}
    default = ClusterConfig(
        topology=topo,
        priority_levels=levels,
        policy=policy,
        placement=placement,
        hash_name=hash_name,
        seed=seed,
        profiling_window_s=window,
        heartbeat_timeout_s=heartbeat,
    )
    token, token_path = load_token(token_file, fallback=Path(str(db) + ".token"))
    try:
        store = Store(db)
    except Exception as exc:  # sqlite3.Error and OSError: a file that is not a database, a bad directory
        raise InputError(f"cannot open the database: {exc}", where=str(db)) from None
    service = DaemonService(store, default=default)
    if service.config != default and store.config() is not None:
        typer.echo(
            f"resuming {db}: its stored configuration is kept (policy {service.config.policy})", err=True
        )
    sock = bind(where)
    port = sock.getsockname()[1] if where.path is None else None
    _announce(where.url(port))
    typer.echo(f"token: {token_path}", err=True)
    try:
        serve(create_app(service, token=token), sock)
    finally:
        store.close()


@user_errors
def agent(
    daemon_url: str = typer.Option(
        ..., "--daemon", help="The daemon's base URL, e.g. http://127.0.0.1:8080, or unix:PATH."
    ),
    host: str = typer.Option(..., "--host", help="This host's name in the daemon's topology."),
    ports: Path | None = typer.Option(
        None, "--ports", help="Probe table JSON (src ip, dst ip, path) -> port."
    ),
    listen: str = typer.Option("127.0.0.1:0", "--listen", help="unix:PATH or 127.0.0.1:PORT for local jobs."),
    token_file: Path | None = typer.Option(
        None, "--token-file", help="Daemon token (registration, counters)."
    ),
    state: Path | None = typer.Option(
        None, "--state", help="Last-decision file (default: ./commsched-agent-HOST.json)."
    ),
    nic: list[str] = typer.Option([], "--nic", help="NIC_ID=IP registered with the daemon (repeatable)."),
    counters: str = typer.Option("none", "--counters", help="Counter source: none, netdev, netdev:IF,..."),
    wait_s: float = typer.Option(20.0, "--wait", min=0.1, help="Long-poll duration, s."),
    enforce: bool = typer.Option(
        False, "--enforce", help="Enforce on unmodified jobs: cgroups, DSCP and paths by nftables (root)."
    ),
    testbed: str | None = typer.Option(
        None, "--testbed", help="With --enforce: the testbed this host is on (its routers find the ports)."
    ),
    profile_window: float = typer.Option(
        0.0, "--profile-window", min=0.0, help="With --enforce: post each job's traffic profile after S s."
    ),
    ledger: Path | None = typer.Option(
        None, "--ledger", help="With --enforce: what the agent made (default: beside --state)."
    ),
    oracle: str | None = typer.Option(
        None,
        "--oracle",
        help="With --enforce: path oracle, probe (TTL probes; default off a testbed) or routes (testbed).",
    ),
    fabric: Path | None = typer.Option(
        None, "--fabric", help="With --oracle probe: the fabric map JSON (topology, router addresses)."
    ),
    metrics_listen: str | None = typer.Option(
        None,
        "--metrics-listen",
        help="HOST:PORT serving GET /metrics (Prometheus); other hosts need the --token-file token.",
    ),
    stop_jobs: bool = typer.Option(
        False, "--stop-jobs", help="With --enforce: a clean stop also stops the jobs' processes."
    ),
    slurm: bool = typer.Option(
        False,
        "--slurm",
        help="With --enforce: adopt the processes of Slurm jobs (by SLURM_JOB_ID, docs/slurm.md).",
    ),
) -> None:
    """Run a host agent: follow the daemon's decisions and serve local jobs their source port and DSCP.

    With --enforce it also puts each job's processes in a cgroup and enforces the job's DSCP and paths
    on every TCP connection they open, with no change to the program (docs/real-jobs.md).
    """
    _need_runtime()
    from commsched.runtime.agent import counter_source, load_probe_table
    from commsched.runtime.agent.app import create_agent_app
    from commsched.runtime.agent.follower import Follower
    from commsched.runtime.http.serving import bind, parse_listen, serve

    if not daemon_url.startswith(("http://", "https://", "unix:")):
        raise InputError(
            f"bad URL {daemon_url!r}", where="--daemon", expected="http://HOST:PORT or unix:PATH"
        )
    where = parse_listen(listen)
    table = load_probe_table(ports) if ports is not None else None
    source = counter_source(counters)
    token = read_token(token_file)
    nics = _parse_nics(nic)
    sock = bind(where)
    url = where.url(sock.getsockname()[1] if where.path is None else None)
    follower = Follower(
        daemon=daemon_url,
        host=host,
        token=token,
        wait_s=wait_s,
        state_path=state or Path(f"commsched-agent-{host}.json"),
        registration={"name": host, "nics": nics, "agent": url},
    )
    # the metrics first: a listener that cannot bind fails before anything is made, and a probing
    # path oracle counts into metrics.probes
    metrics, metrics_server = _agent_metrics(follower, metrics_listen, token)
    enforcer = _enforcer(follower, metrics, enforce, testbed=testbed, ledger=ledger, oracle=oracle,
                         profile_window=profile_window, fabric=fabric, stop_jobs=stop_jobs,
                         slurm=slurm)  # fmt: skip
    metrics.watch(enforcer)
    follower.start()
    _announce(url)
    try:
        app = create_agent_app(
            follower, table=table, counters=source, enforcer=enforcer, token=token, metrics=metrics
        )
        serve(app, sock)
    finally:
        follower.stop()
        if metrics_server is not None:
            metrics_server.close()
        if enforcer is not None:
            enforcer.close(stop_processes=stop_jobs)


def _enforcer(follower: Any, metrics: Any, enforce: bool, **opts: Any) -> Any:
    """The agent's enforcer (``None`` without ``--enforce``, which its options need)."""
    if not enforce:
        if any(v not in (None, False, 0.0) for v in opts.values()):
            raise InputError(
                "given without --enforce",
                where="--testbed/--ledger/--profile-window/--oracle/--fabric/--stop-jobs/--slurm",
            )
        return None
    from commsched.runtime.enforce import make_enforcer

    ledger = opts["ledger"]
    return make_enforcer(
        follower,
        testbed=opts["testbed"],
        ledger=ledger or Path(str(follower.state_path) + ".enforce.json"),
        profile_window_s=opts["profile_window"],
        oracle=opts["oracle"],
        fabric=opts["fabric"],
        probe_metrics=metrics.probes,
        slurm=opts["slurm"],
    )


def _parse_nics(items: list[str]) -> list[NicJSON]:
    """``--nic NIC_ID=IP`` options as the agent's registration lists them."""
    nics: list[NicJSON] = []
    for item in items:
        nid, sep, ip = item.partition("=")
        if not sep or not nid:
            raise InputError(f"bad NIC {item!r}", where="--nic", expected="NIC_ID=IP")
        nics.append({"id": nid, "ip": ip or None})
    return nics


def _agent_metrics(follower: Any, listen: str | None, token: str | None) -> tuple[Any, Any]:
    """The agent's metrics, and their listener on ``listen`` (``HOST:PORT``) when given."""
    from commsched.runtime.agent.metrics import AgentMetrics, serve_metrics
    from commsched.runtime.http.serving import parse_listen

    metrics = AgentMetrics(follower)
    if listen is None:
        return metrics, None
    where = parse_listen(listen, where="--metrics-listen")
    if where.path is not None:
        raise InputError("a Unix socket given", where="--metrics-listen", expected="HOST:PORT (TCP)")
    try:
        server = serve_metrics(metrics, host=where.host, port=where.port, token=token)
    except OSError as exc:
        raise InputError(f"cannot listen: {exc.strerror}", where="--metrics-listen") from None
    sys.stderr.write(f"metrics on {where.url(server.port)}/metrics\n")
    return metrics, server


def register(app: typer.Typer) -> None:
    app.command("daemon")(daemon)
    app.command("agent")(agent)
