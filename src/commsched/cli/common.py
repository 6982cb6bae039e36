"""Shared plumbing of the command line: error handling, JSON output, consoles."""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from commsched.errors import CommschedError, InputError, ValidationError
from commsched.io.numbers import tidy

P = ParamSpec("P")
R = TypeVar("R")

#: exit code for bad input (missing file, malformed YAML, invalid scenario, unknown name)
EXIT_INPUT = 2
#: exit code for a failure of commsched itself on valid input (infeasible problem, internal error)
EXIT_FAILURE = 1


def stderr_console() -> Console:
    """Errors and progress; text is printed literally (no Rich markup, no emoji codes)."""
    return Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)


def stdout_console() -> Console:
    """Tables fit a terminal; piped output gets 120 columns so tables are not cut.

    User text (ids, names, file contents) is printed literally: markup such as ``[/x]`` and emoji codes
    such as ``:x:`` are not interpreted; styled output is built from :class:`rich.text.Text`.
    """
    probe = Console()
    return Console(highlight=False, width=None if probe.is_terminal else 120, markup=False, emoji=False)


@contextmanager
def option_names(**names: str) -> Iterator[None]:
    """Errors that name a function's parameter (``size_bytes``) name the option the user typed instead.

    Examples
    --------
    >>> with option_names(size_bytes="--bytes"):  # doctest: +ELLIPSIS
    ...     raise InputError("size -1", where="size_bytes", expected=">= 0")
    Traceback (most recent call last):
    ...
    commsched.errors.InputError: --bytes: size -1 (expected >= 0)
    """
    try:
        yield
    except InputError as exc:
        if exc.where in names:
            raise InputError(exc.what, where=names[exc.where], expected=exc.expected) from None
        raise


def read_token(path: Path | None) -> str | None:
    """The bearer token in ``path`` (``None`` when no file is given); an unreadable file is one line."""
    if path is None:
        return None
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise InputError(f"cannot read the token file: {exc.strerror}", where=str(path)) from None


def check_count(value: int | None, where: str, *, lo: int = 1, hi: int) -> int | None:
    """A count given on the command line, within ``lo .. hi`` (bounded so that no run is absurd)."""
    if value is not None and not lo <= value <= hi:
        raise InputError(f"{value}", where=where, expected=f"an integer in {lo} .. {hi:,}")
    return value


def check_number(value: float | None, where: str, *, lo: float = 0.0, lo_open: bool = False) -> float | None:
    """A finite number given on the command line, at least ``lo`` (more than ``lo`` with ``lo_open``)."""
    if value is not None and not (math.isfinite(value) and (value > lo if lo_open else value >= lo)):
        raise InputError(
            f"{value}", where=where, expected=f"a finite number {'>' if lo_open else '>='} {lo:g}"
        )
    return value


def placement_name(scenario: Any, policy: str) -> str:
    """The placement a run used: the scenario's, or the policy's own for a bundle that brings one."""
    from commsched.catalog import policy_registry

    reg = policy_registry()
    if policy in reg and reg.get(policy).placement is not None:
        return f"{policy} (the policy's own)"
    return str(scenario.placement)


def check_seed(seed: int | None, *, where: str = "--seed") -> int | None:
    """A seed given on the command line: a non-negative integer below 2**63."""
    if seed is not None and not 0 <= seed < 2**63:
        raise InputError(f"seed {seed}", where=where, expected="an integer in 0 .. 2**63-1")
    return seed


def check_out_dir(out: Path | None, *, where: str = "--out", make_parents: bool = True) -> Path | None:
    """Check an output folder before any work is done.

    It may exist as a writable folder, or be a new path under an existing writable folder: the missing
    folders are made when the results are written (``make_parents=False``: only a new name in an existing
    folder). A file in its place or on its way, and a folder that cannot be written, are
    :class:`InputError`.
    """
    if out is None:
        return None
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} exists and is not a folder", where=where, expected="a folder or a new name")
    probe = out if out.exists() else out.parent
    if make_parents:
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
    if not probe.exists():
        raise InputError(
            f"folder {probe} of {out} does not exist", where=where, expected="a path in an existing folder"
        )
    if not probe.is_dir():
        raise InputError(
            f"{probe} of {out} is not a folder", where=where, expected="a path in an existing folder"
        )
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"folder {probe} is not writable", where=where, expected="a writable folder")
    return out


def print_json(obj: Any) -> None:
    """Print exactly one JSON object on stdout (machine-readable output of ``--json``).

    Floats are rounded at this edge (no noise such as ``1.0000000000000069``), utilisations clamped to
    ``[0, 1]``; see :func:`commsched.io.numbers.tidy`.
    """
    sys.stdout.write(json.dumps(tidy(obj), indent=2, sort_keys=False, allow_nan=False) + "\n")
    sys.stdout.flush()


def write_json(out_dir: Path, name: str, obj: Any) -> Path:
    """Write ``obj`` as ``out_dir/name`` atomically, numbers tidied as on stdout."""
    from commsched.io.results import write_files

    (path,) = write_files(out_dir, {name: json.dumps(tidy(obj), indent=2, allow_nan=False) + "\n"})
    return path


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
