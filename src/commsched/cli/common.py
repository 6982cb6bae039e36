"""Shared plumbing of the command line: error handling, JSON output, consoles."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from commsched.errors import CommschedError, InputError, ValidationError

P = ParamSpec("P")
R = TypeVar("R")

#: exit code for bad input (missing file, malformed YAML, invalid scenario, unknown name)
EXIT_INPUT = 2
#: exit code for a failure of commsched itself on valid input (infeasible problem, internal error)
EXIT_FAILURE = 1


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def stdout_console() -> Console:
    """Tables fit a terminal; piped output gets 120 columns so tables are not cut."""
    probe = Console()
    return Console(highlight=False, width=None if probe.is_terminal else 120)


def print_json(obj: Any) -> None:
    """Print exactly one JSON object on stdout (machine-readable output of ``--json``)."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n")
    sys.stdout.flush()


def user_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn commsched's errors into one clear line on stderr and a non-zero exit, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except ValidationError as exc:
            err = stderr_console()
            for p in exc.problems:
                err.print(f"error: {exc.where}: {p}" if exc.where else f"error: {p}", markup=False)
            raise typer.Exit(EXIT_INPUT) from None
        except InputError as exc:
            stderr_console().print(f"error: {exc.line()}", markup=False)
            raise typer.Exit(EXIT_INPUT) from None
        except CommschedError as exc:
            stderr_console().print(f"error: {exc}", markup=False)
            raise typer.Exit(EXIT_FAILURE) from None
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            if os.environ.get("COMMSCHED_DEBUG"):
                raise
            stderr_console().print(
                f"internal error: {type(exc).__name__}: {exc} (set COMMSCHED_DEBUG=1 for the traceback)",
                markup=False,
            )
            raise typer.Exit(EXIT_FAILURE) from None

    return wrapper
