"""``commsched slurm prolog|epilog``: Slurm's hooks that register each job with the daemon and drop it.

Run by Slurm as ``PrologSlurmctld``/``EpilogSlurmctld`` (or a node's ``Prolog``/``Epilog``) through a
two-line script (docs/slurm.md); everything comes from Slurm's environment and these options (each
also read from its environment variable, since Slurm passes a hook no arguments). Both always exit
0: a failure is one line in the log and the job runs unscheduled
(:mod:`commsched.runtime.slurm.prolog`).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import typer

slurm_app = typer.Typer(help="Slurm's hooks: register each job with the daemon, drop it at its end.")


def _settings(
    daemon: str, token_file: str, host_map: str, model: str, timeout: float, scontrol: str
) -> object:
    from commsched.runtime.slurm.prolog import SlurmSettings

    token = Path(token_file).read_text().strip() if token_file else None
    hosts: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in host_map.replace(";", ",").split(","))):
        node, sep, host = item.partition("=")
        if not sep or not node or not host:
            raise ValueError(f"--host-map: bad item {item!r} (expected NODE=HOST)")
        hosts[node] = host
    return SlurmSettings(
        daemon=daemon.rstrip("/"),
        token=token or None,
        hosts=hosts,
        model=model or None,
        timeout_s=timeout,
        scontrol=scontrol or None,
    )


def _log(line: str, log: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    text = f"{stamp} commsched slurm[{os.getpid()}]: {line}\n"
    try:
        if log:
            with open(log, "a") as fh:
                fh.write(text)
            return
    except OSError:
        pass
    sys.stderr.write(text)


_DAEMON = typer.Option("unix:/run/commsched/daemon.sock", "--daemon", envvar="COMMSCHED_DAEMON",
                       help="The daemon: unix:PATH or http://HOST:PORT.")  # fmt: skip
_TOKEN = typer.Option("", "--token-file", envvar="COMMSCHED_TOKEN_FILE", help="The daemon's token.")
_HOSTS = typer.Option("", "--host-map", envvar="COMMSCHED_SLURM_HOSTS",
                      help="NODE=HOST,...: Slurm node -> daemon host (default: the same name).")  # fmt: skip
_MODEL = typer.Option("", "--model", envvar="COMMSCHED_SLURM_MODEL",
                      help="Model of a job whose comment names none (default: nominal).")  # fmt: skip
_TIMEOUT = typer.Option(2.0, "--timeout", envvar="COMMSCHED_SLURM_TIMEOUT", min=0.1, max=30.0,
                        help="Time-out of each request to the daemon, s.")  # fmt: skip
_LOG = typer.Option("", "--log", envvar="COMMSCHED_SLURM_LOG", help="File the hook appends its line to.")
_SCONTROL = typer.Option("", "--scontrol", envvar="COMMSCHED_SLURM_SCONTROL",
                         help="The scontrol program (default: on PATH, else /usr/bin/scontrol).")  # fmt: skip


@slurm_app.command("prolog")
def prolog(
    daemon: str = _DAEMON, token_file: str = _TOKEN, host_map: str = _HOSTS, model: str = _MODEL,
    timeout: float = _TIMEOUT, log: str = _LOG, scontrol: str = _SCONTROL,
) -> None:  # fmt: skip
    """Register the Slurm job of this environment with the daemon (exits 0 whatever happens)."""
    _hook("prolog", "registered", (daemon, token_file, host_map, model, timeout, scontrol), log)


@slurm_app.command("epilog")
def epilog(
    daemon: str = _DAEMON, token_file: str = _TOKEN, host_map: str = _HOSTS, model: str = _MODEL,
    timeout: float = _TIMEOUT, log: str = _LOG, scontrol: str = _SCONTROL,
) -> None:  # fmt: skip
    """Drop the Slurm job of this environment from the daemon (exits 0 whatever happens)."""
    _hook("epilog", "dropped", (daemon, token_file, host_map, model, timeout, scontrol), log)


def _hook(which: str, done: str, options: tuple[str, str, str, str, float, str], log: str) -> None:
    """Run the ``which`` hook on this environment and log its line; nothing it meets may fail the job."""
    from commsched.runtime.slurm import prolog as hooks

    try:
        settings = _settings(*options)
        if not isinstance(settings, hooks.SlurmSettings):  # pragma: no cover - _settings returns one
            raise TypeError("no Slurm settings")
        line = getattr(hooks, which)(os.environ, settings)
    except Exception as exc:  # a bad setting or a daemon away must not fail the job either
        line = f"job {os.environ.get('SLURM_JOB_ID', '?')}: not {done} ({type(exc).__name__}: {exc})"
    _log(line, log)


def register(app: typer.Typer) -> None:
    app.add_typer(slurm_app, name="slurm")
