"""``commsched launch --job ID [--agent URL] -- CMD ...``: run a program as one of a job's processes.

It asks the local host agent for the job's environment (``GET /v1/jobs/{job}/env``: NCCL's traffic
class, service level and interfaces for the job's class and rails, see ``docs/real-jobs.md``); when
the agent enforces (``commsched agent --enforce``) it also asks to be adopted into the job's cgroup
(``POST /v1/jobs/{job}/adopt``), so every connection the program opens carries the job's DSCP and
path; then it replaces itself with ``CMD`` in that environment (``torchrun ...`` included: its
workers inherit both).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from commsched.cli.common import read_token, user_errors
from commsched.errors import InputError

#: where ``launch`` looks for the agent when neither ``--agent`` nor ``$COMMSCHED_AGENT`` says
DEFAULT_AGENT = "unix:/run/commsched/agent.sock"


def _client(url: str, token: str | None) -> Any:
    from commsched.runtime.http.localclient import LocalClient

    try:
        return LocalClient(url.rstrip("/"), token=token, timeout=30.0)
    except ValueError:
        raise InputError(
            f"bad agent URL {url!r}", where="--agent", expected="unix:PATH or http://HOST:PORT"
        ) from None


def _ask(url: str, token: str | None, method: str, path: str, body: Any = None) -> dict[str, Any]:
    from commsched.runtime.http.localclient import LocalHTTPError

    try:
        with _client(url, token) as c:
            r = c.request(method, path, json=body)
    except LocalHTTPError as exc:
        raise InputError(
            f"no agent answers at {url}: {exc}", where="--agent", expected="a running agent"
        ) from None
    try:
        data = r.json()
    except ValueError:
        data = {"error": r.text[:200]}
    if r.status_code >= 300:
        raise InputError(f"the agent refused {method} {path}: {data.get('error', data)}", where="--job")
    return dict(data)


@user_errors
def launch(
    job: str = typer.Option(..., "--job", help="The job this process belongs to (as the daemon knows it)."),
    agent: str | None = typer.Option(
        None,
        "--agent",
        help=f"The local agent: unix:PATH or http://HOST:PORT (default $COMMSCHED_AGENT or {DEFAULT_AGENT}).",
    ),
    token_file: Path | None = typer.Option(
        None,
        "--token-file",
        help="The agent's token, to be adopted by an enforcing agent (default $COMMSCHED_TOKEN_FILE).",
    ),
    command: list[str] = typer.Argument(None, help="The program and its arguments, after --."),
) -> None:
    """Run CMD with the NCCL environment of the job's class; in its cgroup when the agent enforces."""
    if not command:
        raise InputError("no command", where="CMD", expected="commsched launch --job ID -- PROGRAM [ARG...]")
    url = agent or os.environ.get("COMMSCHED_AGENT") or DEFAULT_AGENT
    tf = token_file or (
        Path(os.environ["COMMSCHED_TOKEN_FILE"]) if os.environ.get("COMMSCHED_TOKEN_FILE") else None
    )
    token = read_token(tf)
    answer = _ask(url, token, "GET", f"/v1/jobs/{job}/env")
    if answer.get("enforcing"):
        _ask(url, token, "POST", f"/v1/jobs/{job}/adopt", {"pids": [os.getpid()]})
    env = {**os.environ, **{str(k): str(v) for k, v in answer["env"].items()}}
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        raise InputError(f"cannot run {command[0]!r}: {exc.strerror}", where="CMD") from None


def register(app: typer.Typer) -> None:
    app.command("launch", context_settings={"allow_interspersed_args": False})(launch)
