"""Bring a job up from its roles: the scheduler, servers and workers (any start order).

:func:`run_role` runs a scheduler or a server in this process until the job ends; :func:`start_worker`
registers a worker and connects it (in ``torchrun`` mode it also starts the co-located server and, on
rank 0, the scheduler, in threads). :func:`local_job_env` gives the ``DMLC_*`` environment of each
process of a job on one host.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from commsched.runtime.ps.client import PSClient, connect
from commsched.runtime.ps.errors import PSError
from commsched.runtime.ps.keys import ServerMap
from commsched.runtime.ps.rendezvous import register, serve_scheduler, worker_assignment
from commsched.runtime.ps.roles import RoleEnv
from commsched.runtime.ps.server import Server, run_server


def scheduler_listener(root: tuple[str, int]) -> socket.socket:
    """Listen on the scheduler's address (``SO_REUSEADDR``)."""
    try:
        return socket.create_server(root, reuse_port=False)
    except OSError as exc:
        raise PSError(f"cannot listen on the scheduler address {root[0]}:{root[1]}: {exc}") from None


def run_scheduler(env: RoleEnv) -> None:
    listener = scheduler_listener(env.root)
    try:
        serve_scheduler(
            listener, num_servers=env.num_servers, num_workers=env.num_workers, timeout_s=env.timeout_s
        )
    finally:
        listener.close()


def _announce_host(env: RoleEnv) -> str:
    """``DMLC_NODE_HOST``, or the local address this host reaches the scheduler from (retrying)."""
    if env.node_host is not None:
        return env.node_host
    probe = connect(env.root, timeout_s=env.timeout_s)
    try:
        return str(probe.getsockname()[0])
    finally:
        probe.close()


def register_server(env: RoleEnv, server: Server, *, index: int | None = None) -> None:
    """Announce a started server to the scheduler (blocks until every role registered)."""
    msg: dict[str, object] = {"role": "server", "host": _announce_host(env), "port": server.address[1]}
    if index is not None:
        msg["index"] = index
    register(env.root, msg, timeout_s=env.timeout_s)


def run_role(env: RoleEnv) -> None:
    """Run the scheduler or a server role until the job ends (raises :class:`PSError` on failure)."""
    if env.role == "scheduler":
        run_scheduler(env)
    elif env.role == "server":
        server = Server(num_workers=env.num_workers, host=env.node_host or "0.0.0.0", mark=env.transport.mark)
        server.start()
        try:
            register_server(env, server)
        except BaseException:
            server.stop()
            raise
        run_server(server)
    else:
        raise PSError(f"role {env.role!r} runs the user's command, not a built-in role")


@dataclass(slots=True)
class Worker:
    """A connected worker and whatever it started beside itself (co-located server, scheduler)."""

    env: RoleEnv
    client: PSClient
    rank: int
    background: list[threading.Thread] = field(default_factory=list)
    server: Server | None = None

    def close(self) -> None:
        self.client.close()
        if self.server is not None:
            self.server.done.wait(self.env.timeout_s)
            self.server.stop()


def _thread(target: Callable[[], None], errors: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            target()
        except BaseException as exc:  # reported through the worker's own timeout
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def start_worker(env: RoleEnv, *, server_map: ServerMap | None = None) -> Worker:
    """Register this worker with the scheduler and connect it to every server."""
    background: list[threading.Thread] = []
    errors: list[BaseException] = []
    server: Server | None = None
    if env.colocated:
        if env.rank == 0:
            listener = scheduler_listener(env.root)

            def sched() -> None:
                try:
                    serve_scheduler(
                        listener,
                        num_servers=env.num_servers,
                        num_workers=env.num_workers,
                        timeout_s=env.timeout_s,
                    )
                finally:
                    listener.close()

            background.append(_thread(sched, errors))
        if env.rank is not None and env.rank < env.num_servers:
            server = Server(num_workers=env.num_workers, host="0.0.0.0", mark=env.transport.mark)
            server.start()
            srv, idx = server, env.rank
            background.append(_thread(lambda: register_server(env, srv, index=idx), errors))
    a = worker_assignment(env.root, rank=env.rank, timeout_s=env.timeout_s)
    smap = server_map or ServerMap(num_servers=len(a.servers))
    client = PSClient(
        servers=a.servers,
        rank=a.rank,
        num_workers=env.num_workers,
        transport=env.transport,
        server_map=smap,
        timeout_s=env.timeout_s,
        source=None if env.colocated else env.node_host,
    )
    return Worker(env=env, client=client, rank=a.rank, background=background, server=server)


def local_job_env(
    *, role: str, port: int, num_workers: int, num_servers: int, rank: int | None = None
) -> dict[str, str]:
    """The ``DMLC_*`` variables of one process of a job on this host (scheduler on ``127.0.0.1:port``)."""
    env = {
        "DMLC_ROLE": role,
        "DMLC_PS_ROOT_URI": "127.0.0.1",
        "DMLC_PS_ROOT_PORT": str(port),
        "DMLC_NUM_WORKER": str(num_workers),
        "DMLC_NUM_SERVER": str(num_servers),
    }
    if rank is not None:
        env["DMLC_WORKER_ID"] = str(rank)
    return env
