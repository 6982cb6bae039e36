"""The ``commsched`` command line (Typer + Rich).

Each command lives in its own ``cli/cmd_*.py`` module exposing ``register(app)``; this module only
assembles them.
"""

from __future__ import annotations

import importlib

import typer

from commsched._version import __version__
from commsched.cli.usage import CommschedGroup

#: command modules, each exposing ``register(app: typer.Typer) -> None``
COMMAND_MODULES: tuple[str, ...] = (
    "cmd_simulate",
    "cmd_compare",
    "cmd_topology",
    "cmd_models",
    "cmd_collective",
    "cmd_intrajob",
    "cmd_byteps",
    "cmd_hash_collisions",
    "cmd_vclos",
    "cmd_plan",
    "cmd_microbench",
    "cmd_testbed",
    "cmd_daemon",
    "cmd_policies",
    "cmd_ps",
    "cmd_profile",
    "cmd_launch",
    "cmd_slurm",
)

app = typer.Typer(
    name="commsched",
    cls=CommschedGroup,
    help=(
        "Communication scheduling for multi-tenant GPU training clusters: decide placement, paths and "
        "priority classes (Crux, vClos, BytePS, Mercury and their baselines), simulate what they do to "
        "GPU utilisation and job completion time, and enforce them on real traffic: an emulated fabric "
        "(testbed), a scheduling daemon and host agents, a job transport and a parameter-server runtime."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"commsched {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """commsched: decide and simulate communication scheduling for GPU clusters."""


for _mod in COMMAND_MODULES:
    importlib.import_module(f"commsched.cli.{_mod}").register(app)


def main() -> None:
    """Console-script entry point."""
    app()
