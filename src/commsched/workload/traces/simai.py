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
* every pipeline stage runs the file's lines (the file is one rank's).

References
----------
.. [1] aliyun/SimAI@cef83f9, ``example/workload_analytical.txt``; aliyun/aicb@23eec3c,
   ``workload/simAI/model_workload`` (SimAI, NSDI 2025).
"""

from __future__ import annotations

import re
from pathlib import Path

from commsched.errors import InputError
from commsched.workload.parallel import GroupCollective, GroupedWorkload, GroupKind, ParallelSpec

__all__ = ["read_simai"]

_OPS = {"ALLREDUCE": "all_reduce", "ALLGATHER": "all_gather", "REDUCESCATTER": "reduce_scatter",
        "ALLTOALL": "all_to_all", "BROADCAST": "broadcast"}  # fmt: skip


def _header(line: str, where: str, gpus: int | None) -> dict[str, int]:
    if not line.startswith("HYBRID_TRANSFORMER"):
        raise InputError("not a SimAI workload header", where=where, expected="HYBRID_TRANSFORMER... line")
    vals = {
        k: int(v) for k, v in re.findall(r"(\w+):?\s+(\d+)", line.split(None, 1)[1] if " " in line else "")
    }
    out = {
        "tp": vals.get("model_parallel_NPU_group", 1),
        "ep": vals.get("ep", 1),
        "pp": vals.get("pp", 1),
        "ga": vals.get("ga", 1),
        "pp_comm": vals.get("pp_comm", 0),
    }
    world = vals.get("all_gpus", gpus)
    if world is None:
        raise InputError(
            "the header names no all_gpus", where=where, expected="all_gpus: N, or the job's GPUs"
        )
    out["world"] = world
    return out


def _kind(comm: str, phase: str) -> tuple[GroupKind, bool, str] | None:
    """(group kind, expert DP, operation) of a comm type in a phase (fwd, ig, wg); None: no data."""
    if comm == "NONE":
        return None
    base, expert = comm, False
    for suffix in ("_DP_EP", "_EP"):
        if comm.endswith(suffix):
            base, expert = comm.removesuffix(suffix), True
            break
    if base not in _OPS:
        return None
    if phase == "wg":
        return GroupKind.DP, expert, _OPS[base]
    return (GroupKind.EP if expert else GroupKind.TP), False, _OPS[base]


def read_simai(path: str | Path, *, gpus: int | None = None) -> GroupedWorkload:
    """Read a SimAI workload file into one iteration's group collectives.

    ``gpus``: the job's GPUs where the header names no ``all_gpus``.

    Raises
    ------
    InputError
        The file is not a SimAI workload or its groups do not fit (the message says where).
    """
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", where=str(p), expected="a SimAI workload file") from None
    h = _header(lines[0] if lines else "", f"{p}:1", gpus)
    tp, pp, ep, world = h["tp"], h["pp"], h["ep"], h["world"]
    if world % (tp * pp) or (world // (tp * pp)) % ep:
        raise InputError(
            f"tp {tp} x pp {pp} do not split {world} GPUs into DP groups of a multiple of ep {ep}",
            where=f"{p}:1",
            expected="tp * pp * dp == all_gpus, ep dividing dp",
        )
    dp = world // (tp * pp)
    sizes = {GroupKind.TP: tp, GroupKind.EP: ep, GroupKind.DP: dp}
    acc: dict[tuple[GroupKind, bool, str], float] = {}
    for no, line in enumerate(lines[2:], start=3):
        f = line.split()
        if len(f) < 11:
            raise InputError(
                "a layer line has fewer than 11 fields", where=f"{p}:{no}", expected="SimAI layer line"
            )
        for phase, comm, size in (("fwd", f[3], f[4]), ("ig", f[6], f[7]), ("wg", f[9], f[10])):
            k = _kind(comm, phase)
            if k is not None and float(size) > 0:
                acc[k] = acc.get(k, 0.0) + float(size)
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
    par = ParallelSpec(tp=tp, pp=pp, dp=dp, ep=ep, micro_batches=h["ga"])
    src = f"SimAI workload {p.name}: {len(lines) - 2} layer lines, {world} GPUs"
    return GroupedWorkload(parallel=par, collectives=tuple(colls), source=src)
