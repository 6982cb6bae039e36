"""The JSON documents of ``commsched profile``: a step profile, or the summary of an execution trace.

A *profile document* (``"format": "commsched-profile"``) is what ``commsched profile`` writes for a
measured step or a Kineto trace, and what a scenario names with ``model: {profile: FILE}``. Its fields:

``name``, ``gpu`` (the device the numbers belong to), ``precision``, ``compute_s`` (forward + backward per
iteration, seconds), ``forward_s``, ``backward_s``, ``overlap`` (forward / compute: the fraction of the
compute after which gradients start to be ready), ``sync_bytes`` (gradient bytes per iteration), ``params``,
``batch_size``, ``source`` (one line of provenance), ``provenance`` (``device``, ``device_name``,
``precision``, ``torch``, ``date``, ``batch_size``, ``warmup``, ``iterations``), ``iterations``
(``forward_s``/``backward_s`` of every timed iteration), ``layers`` (forward order: ``name``,
``forward_s``, ``backward_s``, ``param_bytes``), ``gradients`` (the gradient-ready timeline: ``name``,
``bytes``, ``ready_s`` from the start of backward, scaled like the layers so that the last one is
``backward_s``), ``collectives`` (``name``, ``bytes``, ``group``, ``kind``), ``spread`` (``(max - min) /
median`` of the timed iterations' compute, or ``null``), ``unused_params`` and ``frozen_params`` (parameters
left out of ``sync_bytes``) and ``warnings`` (one line each).

An *execution-trace document* (``"format": "commsched-execution-trace"``) holds ``trace_format``
(``pytorch-et`` or ``chakra-et``), ``schema``, ``compute_nodes``, ``compute_s`` (or ``null``) and
``collectives``.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from commsched.errors import InputError
from commsched.workload.profiling.records import Collective, ExecutionTrace, StepProfile
from commsched.workload.records import LayerProfile, ModelProfile

PROFILE_FORMAT = "commsched-profile"
TRACE_FORMAT = "commsched-execution-trace"
VERSION = 1


def _collectives(cs: tuple[Collective, ...]) -> list[dict[str, Any]]:
    return [{"name": c.name, "bytes": c.size_bytes, "group": c.group, "kind": c.kind} for c in cs]


def source_line(p: StepProfile) -> str:
    """One line of provenance: what measured it, on what, in which precision, when."""
    v = p.provenance
    parts = [v.source, f"device {v.device_name or v.device}"]
    parts += [f"{v.precision} precision"] if v.precision else []
    parts += [f"batch {v.batch_size}"] if v.batch_size else []
    parts += [f"torch {v.torch}"] if v.torch else []
    parts += [f"{v.iterations} timed iteration(s) after {v.warmup} warm-up"] if v.warmup else []
    parts += [v.date] if v.date else []
    return "; ".join(parts)


def profile_document(p: StepProfile) -> dict[str, Any]:
    """The JSON object of a step profile (see the module's documentation)."""
    v = p.provenance
    return {
        "format": PROFILE_FORMAT,
        "version": VERSION,
        "name": p.name,
        "gpu": v.device_name or v.device,
        "precision": v.precision,
        "compute_s": p.compute_s,
        "forward_s": p.forward_s,
        "backward_s": p.backward_s,
        "overlap": p.overlap,
        "sync_bytes": p.sync_bytes,
        "params": p.params,
        "batch_size": v.batch_size,
        "source": source_line(p),
        "provenance": asdict(v),
        "iterations": {"forward_s": list(p.forward_all), "backward_s": list(p.backward_all)},
        "layers": [asdict(ly) for ly in p.layers],
        "gradients": [{"name": g.name, "bytes": g.size_bytes, "ready_s": g.ready_s} for g in p.gradients],
        "collectives": _collectives(p.collectives),
        "spread": p.spread,
        "unused_params": list(p.unused_params),
        "frozen_params": list(p.frozen_params),
        "warnings": list(p.warnings),
    }


def trace_document(et: ExecutionTrace) -> dict[str, Any]:
    """The JSON object of an execution-trace summary."""
    return {
        "format": TRACE_FORMAT,
        "version": VERSION,
        "source": et.source,
        "trace_format": et.format,
        "schema": et.schema,
        "compute_nodes": et.compute_nodes,
        "compute_s": et.compute_s,
        "collectives": _collectives(et.collectives),
        "collective_bytes": sum(c.size_bytes for c in et.collectives),
    }


def model_profile(p: StepProfile) -> ModelProfile:
    """The zoo record of a step profile (what a scenario's job simulates)."""
    doc = profile_document(p)
    return model_profile_from_document(doc, where=p.name)


def _number(doc: dict[str, Any], key: str, where: str, *, positive: bool) -> float:
    v = doc.get(key)
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or (v <= 0 if positive else v < 0):  # type: ignore[operator]
        raise InputError(
            f"{key} is {v!r}",
            where=f"{where}: {key}",
            expected=f"a finite number {'>' if positive else '>='} 0",
        )
    return float(v)  # type: ignore[arg-type]


def _layers(doc: dict[str, Any], where: str) -> tuple[LayerProfile, ...]:
    rows = doc.get("layers") or []
    if not isinstance(rows, list):
        raise InputError("not a list", where=f"{where}: layers", expected="a list of layer objects")
    out = []
    for k, r in enumerate(rows):
        at = f"{where}: layers[{k}]"
        if not isinstance(r, dict):
            raise InputError("not an object", where=at, expected="{name, forward_s, backward_s, param_bytes}")
        out.append(
            LayerProfile(
                name=str(r.get("name", k)),
                forward_s=_number(r, "forward_s", at, positive=False),
                backward_s=_number(r, "backward_s", at, positive=False),
                param_bytes=_number(r, "param_bytes", at, positive=False),
            )
        )
    return tuple(out)


def model_profile_from_document(doc: Any, *, where: str) -> ModelProfile:
    """The :class:`ModelProfile` a profile document describes.

    Raises
    ------
    InputError
        Not a profile document (an execution-trace summary included: it has no compute time per
        iteration), or a field out of range.
    """
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt == TRACE_FORMAT:
        raise InputError(
            "an execution-trace summary has no compute time per iteration",
            where=where,
            expected="a profile from `commsched profile SCRIPT:FUNCTION` or `commsched profile --kineto`",
        )
    if fmt != PROFILE_FORMAT:
        raise InputError(
            f"not a commsched profile (format {fmt!r})", where=where, expected=f'"format": "{PROFILE_FORMAT}"'
        )
    compute = _number(doc, "compute_s", where, positive=True)
    forward = _number(doc, "forward_s", where, positive=False)
    batch = doc.get("batch_size")
    return ModelProfile(
        name=str(doc.get("name") or Path(where).stem),
        gpu=str(doc.get("gpu") or "unknown"),
        compute_s=compute,
        sync_bytes=_number(doc, "sync_bytes", where, positive=False),
        overlap=min(max(forward / compute, 0.0), 1.0) if forward > 0 else 1.0,
        source=str(doc.get("source") or where),
        batch_size=batch if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0 else None,
        layers=_layers(doc, where),
        precision=str(doc.get("precision") or ""),
        notes=f"read from {where}",
    )


def read_profile_document(path: str | Path) -> ModelProfile:
    """Read a profile document file (what ``commsched profile --out`` writes) as a :class:`ModelProfile`.

    Raises
    ------
    InputError
        Missing or unreadable file, invalid JSON, or not a profile document.
    """
    from commsched.workload.profiling.tracefile import parse_json, read_bytes

    p = Path(path)
    data = read_bytes(p, max_bytes=64 * 10**6, what="profile")
    doc = parse_json(data, where=str(p), expected="a commsched profile JSON document")
    return model_profile_from_document(doc, where=str(p))


def dumps(doc: dict[str, Any]) -> str:
    """The document as JSON text (no NaN; a trailing newline)."""
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"
