"""Command-line usage errors (bad option values, unknown options, missing arguments) as one line.

Click, under Typer, reports these as a usage block and a boxed message. commsched reports every user
error the same way: ``error: --option: what (expected ...)`` on stderr, exit code 2, no traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from commsched.cli.common import EXIT_INPUT, stderr_console


def _base(name: str) -> type[Exception]:
    """Click's exception class ``name``, found through ``typer.BadParameter`` (Typer may vendor Click)."""
    for cls in typer.BadParameter.__mro__:
        if cls.__name__ == name:
            return cls
    raise LookupError(name)  # pragma: no cover - every Click has these classes


#: Click's base of every error it reports to the user, and of the command-line usage errors
CLICK_EXCEPTION = _base("ClickException")
USAGE_ERROR = _base("UsageError")


_TYPE_WORDS = {"integer": "an integer", "float": "a number", "boolean": "true or false", "path": "a path"}
_ANNOTATION_WORDS: dict[object, str] = {
    int: "an integer",
    float: "a number",
    bool: "true or false",
    Path: "a path",
}


def _expected_of_type(t: Any) -> str:
    """What a Click parameter type accepts, in words ("" when it says nothing useful)."""
    choices = getattr(t, "choices", None)
    if choices:
        return "one of " + ", ".join(map(str, choices))
    name = str(getattr(t, "name", ""))
    if name in _TYPE_WORDS:
        return _TYPE_WORDS[name]
    if "range" in name and hasattr(t, "_describe_range"):
        return f"a number in {t._describe_range()}"
    return ""


def _expected_of_annotation(ann: Any) -> str:
    if isinstance(ann, type) and issubclass(ann, Enum):
        return "one of " + ", ".join(str(m.value) for m in ann)
    return _ANNOTATION_WORDS.get(ann, "")


def _expected(param: Any) -> str:
    """What a parameter accepts, in words."""
    if param is None:
        return ""
    said = _expected_of_type(getattr(param, "type", None))
    help_text = str(getattr(param, "help", "") or "")
    if not said and getattr(param, "param_type_name", "") == "argument" and help_text:
        said = _sentence(help_text.split(". ", maxsplit=1)[0])
    ann = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return said or _expected_of_annotation(ann)


def _typed(param: Any, args: Sequence[str]) -> str:
    """The parameter as the user typed it (``-s`` or ``--seed``), or its metavar for an argument."""
    if param is None:
        return ""
    if getattr(param, "param_type_name", "") == "option":
        opts = [*param.opts, *getattr(param, "secondary_opts", [])]
        for a in args:
            for o in opts:
                if a == o or (o.startswith("--") and a.startswith(o + "=")):
                    return str(o)
                if len(o) == 2 and not o.startswith("--") and a.startswith(o):
                    return str(o)
        return str(max(param.opts, key=len))
    return str(getattr(param, "human_readable_name", "") or getattr(param, "name", "")).upper()


def _sentence(text: str) -> str:
    text = " ".join(text.split()).rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def usage_line(exc: Exception, args: Sequence[str]) -> str:
    """One line for a command-line usage error: ``error: OPTION: what (expected ...)``.

    Examples
    --------
    >>> import typer
    >>> usage_line(typer.BadParameter("'x' is not a valid integer."), ["-s", "x"])
    "error: 'x' is not a valid integer"
    """
    kind = type(exc).__name__
    message = str(getattr(exc, "message", "") or exc)
    if kind == "NoSuchOption":
        hint = ", ".join(sorted(getattr(exc, "possibilities", None) or ()))
        return f"error: {exc.option_name}: no such option" + (  # type: ignore[attr-defined]
            f" (expected {hint})" if hint else ""
        )
    if kind in ("BadOptionUsage",):
        return f"error: {exc.option_name}: {_sentence(message)}"  # type: ignore[attr-defined]
    param = getattr(exc, "param", None)
    if kind == "MissingParameter":
        name = _typed(param, args) or "argument"
        exp = _expected(param)
        return f"error: {name}: missing" + (f" (expected {exp})" if exp else "")
    if hasattr(exc, "param"):  # BadParameter
        name = _typed(param, args)
        param_hint: object = getattr(exc, "param_hint", None)
        if not name and isinstance(param_hint, str):
            name = param_hint.strip("'\"")
        exp = _expected(param)
        msg = _sentence(message)
        head = f"error: {name}: {msg}" if name else f"error: {msg}"
        return head + (f" (expected {exp})" if exp and "expected" not in msg else "")
    text = _sentence(message)
    ctx = getattr(exc, "ctx", None)
    if ctx is not None and text.startswith("no such command"):
        lister = getattr(ctx.command, "list_commands", None)
        if lister is not None:
            text += " (expected one of " + ", ".join(sorted(lister(ctx))) + ")"
    return f"error: {text}"


def untyped_flags(params: Sequence[Any]) -> None:
    """Show on/off flags (``--json``, ``--help``) in help without a value type.

    Typer's help prints every option's type, ``--json <bool>`` for a flag, which reads as if it took a
    value; an empty metavar leaves the type column blank for flags (counters keep theirs).
    """
    for p in params:
        if getattr(p, "is_flag", False) and not getattr(p, "count", False) and p.metavar is None:
            p.metavar = ""


class CommschedGroup(TyperGroup):
    """The root command group: usage errors become one ``error:`` line and exit code 2; flags are
    shown without a value type (:func:`untyped_flags`).
    """

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        untyped_flags(params)
        return params

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        cmd = super().get_command(ctx, cmd_name)
        todo = [cmd] if cmd is not None else []
        while todo:  # the command, and those of a group such as ``testbed``
            c = todo.pop()
            untyped_flags([*c.params, c.get_help_option(ctx)])
            todo.extend(getattr(c, "commands", {}).values())
        return cmd

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        run = super().main
        if not standalone_mode:
            return run(argv, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            rv = run(argv, prog_name, complete_var, False, windows_expand_args, **extra)
        except USAGE_ERROR as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":
                sys.stderr.write(str(getattr(exc, "message", exc)) + "\n")
            else:
                stderr_console().print(usage_line(exc, argv))
            sys.exit(EXIT_INPUT)
        except CLICK_EXCEPTION as exc:
            stderr_console().print(f"error: {_sentence(str(getattr(exc, 'message', exc)))}")
            sys.exit(EXIT_INPUT)
        except typer.Abort:
            stderr_console().print("aborted")
            sys.exit(1)
        except typer.Exit as exc:
            sys.exit(exc.exit_code)
        sys.exit(rv if isinstance(rv, int) else 0)
