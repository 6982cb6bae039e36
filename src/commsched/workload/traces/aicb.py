"""Read AICB per-collective logs (``physical/model_workload/*.csv``) into grouped workloads.

An AICB log starts with a line naming the ranks (``[rank0 ~ rank127]``, or ``[ pp_stage0: [...] ]`` for
one section per pipeline stage), then a column header and ``comm_type,comm_group,comm_group_size,
msg_size,stage,...`` rows for every collective one rank runs, with ``init`` rows and ``epoch_end``
delimiters. One iteration is the rows between a section's two ``epoch_end`` rows; ``init`` rows are left
out.

The reader is strict: columns are found by their names in the header (``comm_type``, ``comm_group``,
``comm_group_size``, ``msg_size``, ``stage`` required; ``count`` optional, 1 where absent or empty); a
row with another number of fields than its header (a file cut mid-row), a section whose iteration has no
closing ``epoch_end`` (a file cut at a row boundary), an unknown collective or group, and a number out of
its bounds are refused with the file, the line and what was expected. Bounds: ``msg_size`` finite, ``>=
0`` and at most :data:`MAX_MSG_BYTES`; ``comm_group_size`` an integer from 1 to the world size;
``count`` an integer from 1 to :data:`MAX_COUNT`.

How the sections combine: a pipelined file has one section per stage; section ``s`` lists what the
ranks of stage ``s`` run, so its collectives become collectives of stage ``s`` (their groups are the TP
and DP groups of that stage). A file with one section lists what every rank runs (``pp = 1``).
``isend`` rows send to the next stage in a ``forward_step`` and to the previous one in a
``backward_step``; ``irecv`` rows are kept as listed ``recv`` messages that put nothing on the wire
(the matching ``isend`` of the other stage does). ``barrier`` rows carry no data.

The parallel degrees come from the group sizes (``tp`` = the TP group's size, ``pp`` = the number of
sections, ``dp`` = world / (tp pp), checked against the DP group's size where the iteration has one),
the micro-batches from the forward sends of stage 0, the ZeRO stage from the file name (``zero2``,
``zero3``; else 1). The world size is the one the first line names. A kind of group the layout implies
(``dp > 1``, ``pp > 1``) with no row in the iteration is named in the workload's provenance
(:attr:`~commsched.workload.parallel.GroupedWorkload.absent`): AICB's Megatron TP2 x PP8 LLaMA-65B log,
for one, lists no DP synchronisation.

References
----------
.. [1] aliyun/aicb@23eec3c, ``workload/physical/model_workload`` (AICB; the SimAI paper, NSDI 2025).
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from commsched.errors import InputError
from commsched.workload.parallel import GroupCollective, GroupedWorkload, GroupKind, ParallelSpec

__all__ = ["MAX_COUNT", "MAX_MSG_BYTES", "AicbLog", "read_aicb"]

#: the largest message a row may list: 10 TB (GPT-175B's fp32 gradients in one bucket are 0.7 TB)
MAX_MSG_BYTES = 1e13
#: the largest ``count`` of one row
MAX_COUNT = 1 << 20

_KINDS = {
    "tp_group": GroupKind.TP,
    "dp_group": GroupKind.DP,
    "pp_group": GroupKind.PP,
    "ep_group": GroupKind.EP,
}
_OPS = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "alltoall", "isend", "irecv"}
_REQUIRED = ("comm_type", "comm_group", "comm_group_size", "msg_size", "stage")
_Key = tuple[GroupKind, str, int, float, int | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Row:
    """One iteration row, checked: line number, operation, group, group size, bytes, stage, count."""

    no: int
    op: str
    group: str
    n: int
    size: float
    stage: str
    count: int


class AicbLog:
    """The rows of one AICB log: world size and, per section, the iteration's rows."""

    __slots__ = ("path", "sections", "world")

    def __init__(self, path: Path, world: int, sections: list[list[_Row]]) -> None:
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


def _columns(row: list[str], where: str) -> dict[str, int]:
    """The column index of each name of a header row (refused where a required name is missing)."""
    cols = {name.strip(): k for k, name in enumerate(row)}
    missing = [c for c in _REQUIRED if c not in cols]
    if missing:
        raise InputError(
            f"the column header lacks {', '.join(missing)} (it names {', '.join(row)[:120]})",
            where=where,
            expected="a header naming " + ", ".join(_REQUIRED) + " [, count]",
        )
    return cols


def _int(text: str, name: str, top: int, where: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise InputError(f"{name} {text!r} is not an integer", where=where, expected=f"1..{top}") from None
    if not 1 <= v <= top:
        raise InputError(f"{name} {v} out of bounds", where=where, expected=f"an integer from 1 to {top}")
    return v


def _parse(row: list[str], cols: dict[str, int], no: int, world: int, where: str) -> _Row:
    op = row[cols["comm_type"]].removeprefix("CommType.")
    group = row[cols["comm_group"]].removeprefix("CommGroup.")
    init = row[cols["stage"]].startswith("init")  # set-up rows: any group (embedding_group ...)
    if op != "barrier" and not init and (op not in _OPS or group not in _KINDS):
        raise InputError(
            f"unknown collective {row[cols['comm_type']]!r} in group {row[cols['comm_group']]!r}",
            where=where,
            expected="CommType." + ", CommType.".join(sorted(_OPS)) + " in a tp, dp, pp or ep group",
        )
    text = row[cols["msg_size"]]
    try:
        size = float(text)
    except ValueError:
        size = math.nan
    if not (math.isfinite(size) and 0.0 <= size <= MAX_MSG_BYTES):
        raise InputError(
            f"msg_size {text!r} out of bounds",
            where=where,
            expected=f"bytes, finite, 0 to {MAX_MSG_BYTES:.0e}",
        )
    raw = row[cols["count"]] if "count" in cols else ""
    count = _int(raw, "count", MAX_COUNT, where) if raw.strip() else 1
    n = 1 if op == "barrier" else _int(row[cols["comm_group_size"]], "comm_group_size", world, where)
    return _Row(no=no, op=op, group=group, n=n, size=size, stage=row[cols["stage"]], count=count)


class _Scan:
    """The reader's state over one file: sections, world, column map, whether an iteration is open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sections: list[list[_Row]] = []
        self.world = 0
        self.inside = False
        self.closed = 0
        self.opened_at = 0
        self.cols: dict[str, int] | None = None

    def section(self, line: str, where: str) -> None:
        if self.inside:
            raise InputError(
                f"the section's iteration opened at line {self.opened_at} has no closing epoch_end",
                where=where,
                expected="a CommType.epoch_end row before the next section",
            )
        self.world = max(self.world, _world(line, where))
        self.sections.append([])
        self.cols = None

    def row(self, row: list[str], no: int, where: str) -> None:
        if self.cols is None:
            raise InputError("a row before the column header", where=where, expected="a comm_type,... header")
        if len(row) != len(self.cols):
            raise InputError(
                f"{len(row)} fields, the header has {len(self.cols)} (a row cut short?)",
                where=where,
                expected=f"{len(self.cols)} comma-separated fields",
            )
        if row[0] == "CommType.epoch_end":
            if not self.sections:
                self.sections.append([])
            self.inside = not self.inside
            self.opened_at = no
            self.closed += not self.inside
            return
        if self.world == 0:
            raise InputError(
                "no ranks named before the rows",
                where=where,
                expected="a first line '[rank0 ~ rankN]' or '[ pp_stage0: ...'",
            )
        r = _parse(row, self.cols, no, self.world, where)
        if self.inside and not r.stage.startswith("init"):
            self.sections[-1].append(r)


def _read(path: Path) -> AicbLog:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", where=str(path), expected="an AICB workload CSV") from None
    if not lines:
        raise InputError("empty file", where=str(path), expected="an AICB workload CSV")
    scan = _Scan(path)
    for no, (line, row) in enumerate(zip(lines, csv.reader(lines), strict=True), start=1):
        where = f"{path}:{no}"
        if line.startswith("["):
            scan.section(line, where)
        elif row and not row[0].startswith("CommType."):
            scan.cols = _columns(row, where)
        elif row:
            scan.row(row, no, where)
    if scan.inside:
        raise InputError(
            f"the iteration opened by the epoch_end at line {scan.opened_at} has no closing epoch_end",
            where=f"{path}:{len(lines)}",
            expected="a CommType.epoch_end row after the iteration's last row (a file cut short?)",
        )
    if scan.world == 0 or not scan.closed:
        raise InputError(
            "no iteration rows between epoch_end rows", where=str(path), expected="an AICB workload CSV"
        )
    return AicbLog(path, scan.world, scan.sections)


def _key(r: _Row, stage: int | None) -> _Key:
    op = r.op
    if op in ("isend", "irecv"):
        op = (
            "recv"
            if op == "irecv"
            else ("send_backward" if r.stage.startswith("backward") else "send_forward")
        )
    op = "all_to_all" if op == "alltoall" else op
    return (_KINDS[r.group], op, r.n, r.size, stage)


def read_aicb(path: str | Path) -> GroupedWorkload:
    """Read an AICB per-collective log into one iteration's group collectives.

    Raises
    ------
    InputError
        The file cannot be read, is not an AICB log, is cut short or holds a number out of bounds (the
        message says the file and line, and what was expected).
    """
    p = Path(path)
    log = _read(p)
    pipelined = len(log.sections) > 1
    counts: Counter[_Key] = Counter()
    for s, rows in enumerate(log.sections):
        for r in rows:
            if r.op == "barrier":  # no data
                continue
            counts[_key(r, s if pipelined else None)] += r.count
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
    listed = {k[0] for k in counts}
    implied = {GroupKind.DP: dp, GroupKind.PP: pp}
    absent = tuple(kind for kind, degree in implied.items() if degree > 1 and kind not in listed)
    src = f"AICB log {p.name}: {sum(len(r) for r in log.sections)} rows of one iteration, world {log.world}"
    for kind in absent:
        src += (
            f"; no {kind.value} rows in the iteration though the layout implies {kind.value} {implied[kind]}"
            f" (the log puts no {kind.value.upper()} traffic on the fabric)"
        )
    return GroupedWorkload(parallel=par, collectives=colls, source=src, absent=absent)
