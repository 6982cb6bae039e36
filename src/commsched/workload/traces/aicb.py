"""Read AICB per-collective logs (``physical/model_workload/*.csv``) into grouped workloads.

An AICB log starts with a line naming the ranks (``[rank0 ~ rank127]``, or ``[ pp_stage0: [...] ]`` for
one section per pipeline stage), then ``comm_type,comm_group,comm_group_size,msg_size,stage,...`` rows
for every collective one rank runs, with ``init`` rows and ``epoch_end`` delimiters. One iteration is
the rows between a section's two ``epoch_end`` rows; ``init`` rows are left out.

How the sections combine: a pipelined file has one section per stage; section ``s`` lists what the
ranks of stage ``s`` run, so its collectives become collectives of stage ``s`` (their groups are the TP
and DP groups of that stage). A file with one section lists what every rank runs (``pp = 1``).
``isend`` rows send to the next stage in a ``forward_step`` and to the previous one in a
``backward_step``; ``irecv`` rows are kept as listed ``recv`` messages that put nothing on the wire
(the matching ``isend`` of the other stage does). ``barrier`` rows carry no data.

The parallel degrees come from the group sizes (``tp`` = the TP group's size, ``pp`` = the number of
sections, ``dp`` = world / (tp pp), checked against the DP group's size where the iteration has one),
the micro-batches from the forward sends of stage 0, the ZeRO stage from the file name (``zero2``,
``zero3``; else 1). The world size is the one the first line names.

References
----------
.. [1] aliyun/aicb@23eec3c, ``workload/physical/model_workload`` (AICB; the SimAI paper, NSDI 2025).
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path

from commsched.errors import InputError
from commsched.workload.parallel import GroupCollective, GroupedWorkload, GroupKind, ParallelSpec

__all__ = ["AicbLog", "read_aicb"]

_KINDS = {
    "tp_group": GroupKind.TP,
    "dp_group": GroupKind.DP,
    "pp_group": GroupKind.PP,
    "ep_group": GroupKind.EP,
}
_OPS = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "alltoall", "isend", "irecv"}
_Key = tuple[GroupKind, str, int, float, int | None]


class AicbLog:
    """The rows of one AICB log: world size and, per section, the iteration's rows."""

    __slots__ = ("path", "sections", "world")

    def __init__(self, path: Path, world: int, sections: list[list[tuple[int, list[str]]]]) -> None:
        self.path = path
        self.world = world
        self.sections = sections


def _world(first: str, where: str) -> int:
    ranks = [int(x) for x in re.findall(r"rank(\d+)", first)]
    if not ranks:
        raise InputError(
            "no ranks on the first line", where=where, expected="'[rank0 ~ rankN]' or '[ pp_stage0: ...'"
        )
    return max(ranks) + 1


def _read(path: Path) -> AicbLog:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", where=str(path), expected="an AICB workload CSV") from None
    if not lines:
        raise InputError("empty file", where=str(path), expected="an AICB workload CSV")
    sections: list[list[tuple[int, list[str]]]] = []
    world = 0
    inside = False
    for no, (line, row) in enumerate(zip(lines, csv.reader(lines), strict=True), start=1):
        if line.startswith("["):
            world = max(world, _world(line, f"{path}:{no}"))
            sections.append([])
            inside = False
        elif not row or row[0] == "comm_type":
            continue
        elif row[0] == "CommType.epoch_end":
            if not sections:
                sections.append([])
            inside = not inside
        elif inside and not row[4].startswith("init"):
            sections[-1].append((no, row))
    if world == 0 or not any(sections):
        raise InputError(
            "no iteration rows between epoch_end rows", where=str(path), expected="an AICB workload CSV"
        )
    return AicbLog(path, world, sections)


def _row(row: list[str], where: str, stage: int | None) -> tuple[_Key, int] | None:
    op = row[0].removeprefix("CommType.")
    if op == "barrier":
        return None
    group = row[1].removeprefix("CommGroup.")
    if op not in _OPS or group not in _KINDS:
        raise InputError(
            f"unknown collective {row[0]!r} in group {row[1]!r}", where=where, expected="an AICB row"
        )
    try:
        size, n, count = float(row[3]), int(row[2]), int(row[11] or 1)
    except (ValueError, IndexError):
        raise InputError("bad msg_size, comm_group_size or count", where=where, expected="numbers") from None
    kind = _KINDS[group]
    if op in ("isend", "irecv"):
        op = (
            "recv"
            if op == "irecv"
            else ("send_backward" if row[4].startswith("backward") else "send_forward")
        )
    op = "all_to_all" if op == "alltoall" else op
    return (kind, op, n, size, stage), count


def read_aicb(path: str | Path) -> GroupedWorkload:
    """Read an AICB per-collective log into one iteration's group collectives.

    Raises
    ------
    InputError
        The file cannot be read or is not an AICB log (the message says where).
    """
    p = Path(path)
    log = _read(p)
    pipelined = len(log.sections) > 1
    counts: Counter[_Key] = Counter()
    for s, rows in enumerate(log.sections):
        for no, row in rows:
            got = _row(row, f"{p}:{no}", s if pipelined else None)
            if got is not None:
                counts[got[0]] += got[1]
    sizes = {k[0]: k[2] for k in counts if k[0] in (GroupKind.TP, GroupKind.DP, GroupKind.EP)}
    tp, ep, pp = sizes.get(GroupKind.TP, 1), sizes.get(GroupKind.EP, 1), len(log.sections)
    dp = log.world // (tp * pp)
    if sizes.get(GroupKind.DP, dp) != dp or dp * tp * pp != log.world:
        raise InputError(
            f"groups tp {tp} x pp {pp} x dp {sizes.get(GroupKind.DP, dp)} are not the {log.world} ranks",
            where=str(p),
            expected="tp * pp * dp == world size",
        )
    m = sum(c for k, c in counts.items() if k[1] == "send_forward" and k[4] == 0) or 1
    zero = int(z.group(1)) if (z := re.search(r"zero(\d)", p.name)) else 1
    par = ParallelSpec(tp=tp, pp=pp, dp=dp, ep=ep, zero=zero, micro_batches=m)
    colls = tuple(
        GroupCollective(
            kind=kind, op=op, group_size=pp if kind is GroupKind.PP else n, size_bytes=size, count=c,
            stage=stage, blocking=kind is not GroupKind.DP,
        )
        for (kind, op, n, size, stage), c in counts.items()
    )  # fmt: skip
    src = f"AICB log {p.name}: {sum(len(r) for r in log.sections)} rows of one iteration, world {log.world}"
    return GroupedWorkload(parallel=par, collectives=colls, source=src)
