"""Read SimAI workload files (``HYBRID_TRANSFORMER_FWD_IN_BCKWD``) into grouped workloads, with EP.

A SimAI workload file (the format of ASTRA-sim's, extended by aliyun/SimAI) has a header line
``HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: TP [ep: EP pp: PP vpp: V ga: M all_gpus: N
... pp_comm BYTES]``, a line with the number of layer lines, then per layer ``name -1 fwd_compute
fwd_comm fwd_bytes ig_compute ig_comm ig_bytes wg_compute wg_comm wg_bytes delay``.

How it is read (the SimAI generator writes one rank's iteration, its micro-batches unrolled: the
example's 24 ``embedding_layer`` lines are its ``ga: 24`` micro-batches):

* the forward (``fwd``) and input-gradient (``ig``) collectives of every line run once per iteration, in
  the TP group, or in the EP group where the type ends in ``_EP`` (``ALLTOALL_EP``); they block;
* the weight-gradient (``wg``) collectives run in the DP group (``dp = N / (tp pp)`` ranks), or over the
  expert-data-parallel ranks (``dp / ep``) where the type ends in ``_DP_EP``; they overlap;
* ``pp_comm`` bytes cross every stage boundary once per micro-batch forward and once backward (1F1B);
* every pipeline stage runs the file's lines (the file is one rank's);
* ``vpp`` (virtual pipeline stages per GPU of interleaved 1F1B) is kept in the parallel spec.

The reader is strict: the header's fields are read by name (``model_parallel_NPU_group`` required;
``ep``, ``pp``, ``vpp``, ``ga``, ``all_gpus``, ``checkpoints``, ``checkpoint_initiates``, ``pp_comm``
known; each an integer, bytes at most :data:`~commsched.workload.traces.aicb.MAX_MSG_BYTES`), the second
line's count of layer lines must be the file's (a file cut at a line boundary has fewer), every layer
line has its 12 fields (one cut mid-line has fewer), its communication types are known and its numbers
finite and non-negative, bytes at most the same ceiling; each refusal names the file and the line.

References
----------
.. [1] aliyun/SimAI@cef83f9, ``example/workload_analytical.txt``; aliyun/aicb@23eec3c,
   ``workload/simAI/model_workload`` (SimAI, NSDI 2025).
"""

from __future__ import annotations

import math
from pathlib import Path

from commsched.errors import InputError
from commsched.workload.parallel import GroupCollective, GroupedWorkload, GroupKind, ParallelSpec
from commsched.workload.traces.aicb import MAX_MSG_BYTES

__all__ = ["read_simai"]

_OPS = {"ALLREDUCE": "all_reduce", "ALLGATHER": "all_gather", "REDUCESCATTER": "reduce_scatter",
        "ALLTOALL": "all_to_all", "BROADCAST": "broadcast"}  # fmt: skip
_HEADER = ("model_parallel_NPU_group", "ep", "pp", "vpp", "ga", "all_gpus", "checkpoints",
           "checkpoint_initiates", "pp_comm")  # fmt: skip
_MAX_DEGREE = 1 << 24


def _header(line: str, where: str, gpus: int | None) -> dict[str, int]:
    tokens = line.split()
    if not tokens or not tokens[0].startswith("HYBRID_TRANSFORMER"):
        raise InputError("not a SimAI workload header", where=where, expected="HYBRID_TRANSFORMER... line")
    vals: dict[str, int] = {}
    rest = tokens[1:]
    if len(rest) % 2:
        raise InputError(
            f"the header's {rest[-1]!r} has no value", where=where, expected="NAME: INTEGER pairs"
        )
    for name, text in zip(rest[::2], rest[1::2], strict=True):
        key = name.rstrip(":")
        if key not in _HEADER:
            raise InputError(
                f"unknown header field {name!r}", where=where, expected="one of " + ", ".join(_HEADER)
            )
        top = int(MAX_MSG_BYTES) if key == "pp_comm" else _MAX_DEGREE
        if not text.isdigit() or int(text) > top:
            raise InputError(
                f"{key} {text!r} out of bounds", where=where, expected=f"an integer from 0 to {top}"
            )
        vals[key] = int(text)
    if "model_parallel_NPU_group" not in vals:
        raise InputError(
            "the header names no model_parallel_NPU_group", where=where, expected="the TP degree"
        )
    out = {
        "tp": vals["model_parallel_NPU_group"],
        "ep": vals.get("ep", 1),
        "pp": vals.get("pp", 1),
        "vpp": vals.get("vpp", 1),
        "ga": vals.get("ga", 1),
        "pp_comm": vals.get("pp_comm", 0),
    }
    for key in ("tp", "ep", "pp", "vpp", "ga"):
        if out[key] < 1:
            raise InputError(f"{key} {out[key]} out of bounds", where=where, expected="an integer >= 1")
    world = vals.get("all_gpus", gpus)
    if world is None:
        raise InputError(
            "the header names no all_gpus", where=where, expected="all_gpus: N, or the job's GPUs"
        )
    out["world"] = world
    return out


def _kind(comm: str, phase: str, where: str) -> tuple[GroupKind, bool, str] | None:
    """(group kind, expert DP, operation) of a comm type in a phase (fwd, ig, wg); None: no data."""
    if comm == "NONE":
        return None
    base, expert = comm, False
    for suffix in ("_DP_EP", "_EP"):
        if comm.endswith(suffix):
            base, expert = comm.removesuffix(suffix), True
            break
    if base not in _OPS:
        raise InputError(
            f"unknown communication type {comm!r}",
            where=where,
            expected="NONE or " + ", ".join(_OPS) + " (with _EP or _DP_EP)",
        )
    if phase == "wg":
        return GroupKind.DP, expert, _OPS[base]
    return (GroupKind.EP if expert else GroupKind.TP), False, _OPS[base]


def _number(text: str, top: float, where: str, name: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and 0.0 <= v <= top):
        raise InputError(
            f"{name} {text!r} out of bounds", where=where, expected=f"a number from 0 to {top:.0e}"
        )
    return v


def _layers(lines: list[str], p: Path) -> list[tuple[int, list[str]]]:
    """The layer lines (line number, fields), checked against the count the second line names."""
    body = lines[2:]
    while body and not body[-1].strip():
        body.pop()
    text = lines[1].strip() if len(lines) > 1 else ""
    if not text.isdigit():
        raise InputError(f"layer count {text!r}", where=f"{p}:2", expected="the number of layer lines")
    if int(text) != len(body):
        raise InputError(
            f"the second line names {int(text)} layer lines, the file has {len(body)} (a file cut short?)",
            where=f"{p}:{len(body) + 2}",
            expected=f"{int(text)} layer lines",
        )
    out = []
    for no, line in enumerate(body, start=3):
        f = line.split()
        if len(f) < 12:
            raise InputError(
                f"a layer line of {len(f)} fields (a line cut short?)",
                where=f"{p}:{no}",
                expected="12 fields: name -1 fwd_compute fwd_comm fwd_bytes ig_compute ig_comm ig_bytes "
                "wg_compute wg_comm wg_bytes delay",
            )
        for k in (2, 5, 8, 11):
            _number(f[k], 1e18, f"{p}:{no}", "a compute time")
        out.append((no, f))
    return out


def read_simai(path: str | Path, *, gpus: int | None = None) -> GroupedWorkload:
    """Read a SimAI workload file into one iteration's group collectives.

    ``gpus``: the job's GPUs where the header names no ``all_gpus``.

    Raises
    ------
    InputError
        The file is not a SimAI workload, is cut short, holds a number out of bounds or its groups do not
        fit (the message says the file and line).
    """
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", where=str(p), expected="a SimAI workload file") from None
    h = _header(lines[0] if lines else "", f"{p}:1", gpus)
    tp, pp, ep, world = h["tp"], h["pp"], h["ep"], h["world"]
    if world < 1 or world % (tp * pp) or (world // (tp * pp)) % ep:
        raise InputError(
            f"tp {tp} x pp {pp} do not split {world} GPUs into DP groups of a multiple of ep {ep}",
            where=f"{p}:1",
            expected="tp * pp * dp == all_gpus, ep dividing dp",
        )
    dp = world // (tp * pp)
    sizes = {GroupKind.TP: tp, GroupKind.EP: ep, GroupKind.DP: dp}
    acc: dict[tuple[GroupKind, bool, str], float] = {}
    for no, f in _layers(lines, p):
        for phase, comm, size in (("fwd", f[3], f[4]), ("ig", f[6], f[7]), ("wg", f[9], f[10])):
            k = _kind(comm, phase, f"{p}:{no}")
            b = _number(size, MAX_MSG_BYTES, f"{p}:{no}", f"{phase} bytes")
            if k is not None and b > 0:
                acc[k] = acc.get(k, 0.0) + b
    colls = [
        GroupCollective(kind=kind, op=op, group_size=dp // ep if expert else sizes[kind], size_bytes=b,
                        blocking=kind is not GroupKind.DP, expert=expert)
        for (kind, expert, op), b in acc.items()
    ]  # fmt: skip
    if pp > 1 and h["pp_comm"] > 0:
        a = float(h["pp_comm"])
        colls.append(
            GroupCollective(kind=GroupKind.PP, op="pipeline_1f1b", group_size=pp, size_bytes=a, count=h["ga"])
        )
    par = ParallelSpec(tp=tp, pp=pp, dp=dp, ep=ep, micro_batches=h["ga"], vpp=h["vpp"])
    src = f"SimAI workload {p.name}: {len(lines) - 2} layer lines, {world} GPUs"
    if h["vpp"] > 1:
        src += f", vpp {h['vpp']}"
    return GroupedWorkload(parallel=par, collectives=tuple(colls), source=src)
