"""``commsched models``: the model zoo with provenance."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from commsched.cli.common import print_json, stdout_console, user_errors
from commsched.errors import InputError
from commsched.workload.grouped_jobs import llm_models
from commsched.workload.profiling.profiles_io import provenance_to_dict
from commsched.workload.records import ModelProfile
from commsched.workload.zoo import list_models


def model_row(p: ModelProfile) -> dict[str, Any]:
    """The JSON object of one zoo profile (without per-layer rows)."""
    return {
        "name": p.name,
        "aliases": list(p.aliases),
        "family": p.family,
        "gpu": p.gpu,
        "precision": p.precision,
        "compute_s": p.compute_s,
        "sync_bytes": p.sync_bytes,
        "overlap": p.overlap,
        "layers": len(p.layers),
        "batch_size": p.batch_size,
        "flops_per_iteration": p.flops_per_iteration,
        "source": p.source,
        "notes": p.notes,
        "provenance": None if p.provenance is None else provenance_to_dict(p.provenance),
    }


@user_errors
def models_command(
    json_out: bool = typer.Option(False, "--json", help="Print a JSON list of the profiles."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Print each profile's full provenance."),
    gpu: str | None = typer.Option(
        None, "--gpu", help="Only the profiles whose GPU contains this text (case ignored), e.g. h200."
    ),
) -> None:
    """List the model zoo: per-iteration compute, gradient bytes, overlap and where each number comes from.

    After the zoo come the named LLM profiles (``gpt-13b@h200`` ...: the measured H200 profile of
    gpt3-crux scaled by training FLOPs per iteration; for jobs with ``parallel:`` groups).

    Every entry shows the GPU its compute time belongs to, its precision (``fp32``, ``bf16``,
    ``fp32-grads``: fp32 gradients, compute precision not recorded by the source; ``unrecorded``) and
    its provenance (the first part of its source; ``--verbose`` prints all of it and the structured
    provenance: kind, reference, assumptions).
    """
    profiles = (*list_models(), *llm_models())
    if gpu is not None:
        profiles = tuple(p for p in profiles if gpu.lower() in p.gpu.lower())
        if not profiles:
            gpus = sorted({p.gpu for p in list_models()})
            raise InputError(
                f"no profile on a GPU matching {gpu!r}", where="--gpu", expected="one of " + ", ".join(gpus)
            )
    if json_out:
        print_json([model_row(p) for p in profiles])
        return
    table = Table(title="commsched model zoo")
    widest = max((len(p.name) for p in profiles), default=4)
    for col in ("name", "gpu", "precision", "compute_s", "sync MB", "overlap", "layers", "aliases"):
        table.add_column(
            col,
            justify="right" if col in ("compute_s", "sync MB", "overlap", "layers") else "left",
            # a name is never cut or wrapped mid-word: its column is as wide as the widest name
            no_wrap=col == "name",
            min_width=widest if col == "name" else None,
            overflow="fold" if col == "name" else "ellipsis",
        )
    for p in profiles:
        table.add_row(
            p.name,
            p.gpu,
            p.precision or "-",
            f"{p.compute_s:.4g}",
            f"{p.sync_bytes / 1e6:.1f}",  # bytes -> MB (10^6)
            f"{p.overlap:.3f}",
            str(len(p.layers)),
            ", ".join(p.aliases),
        )
    console = stdout_console()
    console.print(table)
    for p in profiles:
        text = p.source if verbose else p.source.split(":")[0]
        console.print(Text.assemble((p.name, "bold"), ": ", text), soft_wrap=not verbose)
        if verbose and p.provenance is not None:
            console.print(f"  provenance: {p.provenance.kind}; reference: {p.provenance.reference}")
            for a in p.provenance.assumptions:
                console.print(f"  assumption: {a}")


def register(app: typer.Typer) -> None:
    """Add ``commsched models`` to ``app``."""
    app.command("models")(models_command)
