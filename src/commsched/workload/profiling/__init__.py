"""Bring your own job: profiles from measured training steps, profiler traces and execution traces.

* :func:`read_kineto` — a :class:`StepProfile` from a Kineto (``torch.profiler``) trace, plain or gzipped;
* :func:`read_execution_trace` — an :class:`ExecutionTrace` from a PyTorch ET (JSON) or a Chakra ET
  (protobuf);
* :func:`layers_from_timeline` — the per-layer profile of a measured step;
* :func:`profile_document`, :func:`read_profile_document` — the JSON profile ``commsched profile`` writes
  and scenarios read.
* :mod:`.profiles_io` — third-party profile files (PipeDream, Tiresias, ASTRA-sim workloads) and the
  shipped zoo's JSON.

What measures (a step with PyTorch, the in-job profiler, traffic from outside) is the runtime side,
:mod:`commsched.runtime.profiling` (``torch`` is optional).
"""

from __future__ import annotations

from pathlib import Path

from commsched.workload.profiling.chakra import read_chakra_et, read_chakra_stream
from commsched.workload.profiling.document import (
    model_profile,
    model_profile_from_document,
    profile_document,
    read_profile_document,
    trace_document,
)
from commsched.workload.profiling.kineto import profile_from_kineto, read_kineto
from commsched.workload.profiling.pytorch_et import read_pytorch_et
from commsched.workload.profiling.records import (
    Collective,
    ExecutionTrace,
    GradientReady,
    Provenance,
    StepProfile,
)
from commsched.workload.profiling.timeline import ModuleTime, layers_from_timeline
from commsched.workload.profiling.tracefile import DEFAULT_MAX_BYTES, looks_like_json, open_trace, parse_json

_SNIFF_BYTES = 4096  # white space, then the first character of a JSON document


def read_execution_trace(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ExecutionTrace:
    """Read a PyTorch execution trace (JSON, plain or gzipped) or a Chakra ET (protobuf).

    Raises
    ------
    InputError
        Missing, empty, oversized, truncated or malformed file, or one of another format.
    """
    where = str(path)
    with open_trace(path, max_bytes=max_bytes) as stream:
        if looks_like_json(stream.head(_SNIFF_BYTES)):
            doc = parse_json(stream.read_all(), where=where, expected="a PyTorch execution trace")
            return read_pytorch_et(doc, where=where)
        return read_chakra_stream(stream, where=where)


__all__ = [
    "DEFAULT_MAX_BYTES",
    "Collective",
    "ExecutionTrace",
    "GradientReady",
    "ModuleTime",
    "Provenance",
    "StepProfile",
    "layers_from_timeline",
    "model_profile",
    "model_profile_from_document",
    "profile_document",
    "profile_from_kineto",
    "read_chakra_et",
    "read_execution_trace",
    "read_kineto",
    "read_profile_document",
    "read_pytorch_et",
    "trace_document",
]
