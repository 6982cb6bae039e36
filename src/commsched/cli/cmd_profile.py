"""``commsched profile``: a model profile from your own PyTorch step, a Kineto trace or an execution trace.

* ``commsched profile FILE.py:FUNCTION --device cpu|cuda --precision fp32|bf16`` measures the step
  (:mod:`commsched.runtime.profiling.step`; needs the ``torch`` extra);
* ``commsched profile --kineto TRACE.json[.gz]`` reads a ``torch.profiler`` trace;
* ``commsched profile --et FILE`` reads a PyTorch execution trace (JSON) or a Chakra ET (protobuf).

The profile is one JSON object (:mod:`commsched.workload.profiling.document`): ``--json`` prints it,
``--out FILE`` writes it (only once everything succeeded) for ``model: {profile: FILE}`` in scenarios.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import typer
from rich.table import Table

from commsched.cli.common import check_count, print_json, stderr_console, stdout_console, user_errors
from commsched.errors import InputError
from commsched.io.numbers import tidy


def _check_out(out: Path | None) -> None:
    if out is None:
        return
    if out.is_dir():
        raise InputError(f"{out} is a folder", where="--out", expected="a file name")
    if not out.parent.is_dir():
        raise InputError(
            f"folder {out.parent} does not exist", where="--out", expected="a path in an existing folder"
        )
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise InputError(f"folder {out.parent} is not writable", where="--out", expected="a writable folder")


def _write(out: Path, text: str) -> None:
    """Write ``text`` to ``out`` atomically: a complete file or none (mode 0666 less the umask)."""
    from commsched.io.results import write_files

    write_files(out.parent, {out.name: text})


def _measure(target: str, opts: dict[str, Any]) -> dict[str, Any]:
    try:
        from commsched.runtime.profiling.step import StepSpec
        from commsched.runtime.profiling.step.child import profile_in_child
    except ImportError as exc:  # torch is an optional extra
        raise InputError(
            f"PyTorch is not installed ({exc})", where="TARGET", expected="pip install 'commsched[torch]'"
        ) from None

    return profile_in_child(StepSpec(target=target, **opts))


def _kineto(path: Path, max_bytes: int, opts: dict[str, Any]) -> dict[str, Any]:
    from commsched.workload.profiling import profile_document, read_kineto

    prof = read_kineto(path, max_bytes=max_bytes, name=opts["name"])
    traced = prof.provenance.precision
    if opts["precision"] is not None and traced and opts["precision"] != traced:
        raise InputError(
            f"--precision {opts['precision']}, but the trace's matrix products ran in {traced}",
            where="--precision",
            expected="the trace's own precision, or no --precision",
        )
    recorded = {k: opts[k] for k in ("precision", "batch_size") if opts[k] is not None}
    if recorded:
        prof = replace(prof, provenance=replace(prof.provenance, **recorded))
    return profile_document(prof)


def _summary(doc: dict[str, Any]) -> None:
    con = stdout_console()
    t = Table(title=doc.get("name") or doc.get("source"), show_header=False)
    t.add_column("field")
    t.add_column("value")
    keys = ("gpu", "precision", "compute_s", "forward_s", "backward_s", "overlap", "sync_bytes", "params",
            "batch_size", "trace_format", "schema", "compute_nodes", "collective_bytes")  # fmt: skip
    for k in keys:
        if doc.get(k) is not None:
            v = doc[k]
            t.add_row(k, f"{v:.6g}" if isinstance(v, float) else str(v))
    for k in ("layers", "gradients", "collectives"):
        if k in doc:
            t.add_row(k, f"{len(doc[k])}")
    t.add_row("source", str(doc.get("source", "")))
    con.print(t)


@user_errors
def profile_command(
    target: str | None = typer.Argument(
        None,
        help="FILE.py:FUNCTION or module:FUNCTION returning (model, step) or (model, batch, loss_fn).",
    ),
    kineto: Path | None = typer.Option(
        None, "--kineto", help="Read a torch.profiler (Kineto) trace, plain or gzipped."
    ),
    et: Path | None = typer.Option(
        None, "--et", help="Read a PyTorch execution trace (JSON) or a Chakra ET (protobuf)."
    ),
    device: str = typer.Option("cpu", "--device", help="Where to run the step: cpu, cuda or cuda:N."),
    precision: str | None = typer.Option(
        None,
        "--precision",
        help="fp32 or bf16 (autocast); default fp32. With --kineto: recorded, not measured.",
    ),
    warmup: int = typer.Option(3, "--warmup", help="Untimed warm-up iterations."),
    iterations: int = typer.Option(10, "--iterations", help="Timed iterations (the medians are reported)."),
    name: str | None = typer.Option(
        None, "--name", help="Name of the profile (default: FILE.FUNCTION, or the trace file's name)."
    ),
    batch_size: int | None = typer.Option(
        None, "--batch-size", help="Samples per iteration, for the provenance."
    ),
    max_bytes: str = typer.Option(
        "512MB", "--max-bytes", help="Largest trace read (plain or decompressed): 512MB, 2GiB, ..."
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write the profile (JSON) to this file."),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object on stdout."),
) -> None:
    """Profile your own training job: time a PyTorch step, or read a Kineto or execution trace."""
    from commsched.workload.profiling import read_execution_trace, trace_document
    from commsched.workload.profiling.document import dumps
    from commsched.workload.profiling.tracefile import parse_size

    given = [x for x in (target, kineto, et) if x is not None]
    if len(given) != 1:
        raise InputError(
            f"{len(given)} inputs given", where="TARGET/--kineto/--et", expected="exactly one of them"
        )
    if name is not None and not name.strip():
        raise InputError("an empty name", where="--name", expected="a non-empty name, or no --name")
    limit = parse_size(max_bytes)
    check_count(batch_size, "--batch-size", hi=10**9)
    _check_out(out)
    opts = {"name": name or "", "precision": precision, "batch_size": batch_size}
    if kineto is not None:
        doc = _kineto(kineto, limit, opts)
    elif et is not None:
        doc = trace_document(read_execution_trace(et, max_bytes=limit))
    else:
        opts |= {
            "device": device,
            "precision": precision or "fp32",
            "warmup": warmup,
            "iterations": iterations,
        }
        doc = _measure(str(target), opts)
    for line in doc.get("warnings") or ():
        stderr_console().print(f"warning: {line}", markup=False)
    if out is not None:
        _write(out, dumps(cast("dict[str, Any]", tidy(doc))))  # 12 significant digits, as on stdout
    if as_json:
        print_json(doc)
    else:
        _summary(doc)
        if out is not None:
            stdout_console().print(f"wrote {out}")


def register(app: typer.Typer) -> None:
    """Add ``commsched profile`` to ``app``."""
    app.command("profile")(profile_command)
