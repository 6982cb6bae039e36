"""A Slurm cluster's own history: ``sacct --parsable2`` output as a trace, and Slurm's host lists.

The file is what this command writes (one header line, ``|``-separated fields, docs/slurm.md)::

    sacct --allusers --allocations --parsable2 --noconvert --starttime 2026-11-01 --endtime 2026-12-01 \\
        --format JobID,JobName,Submit,Start,End,AllocTRES,NodeList,State,Comment > history.txt

Fields (by header name, any order; ``Comment`` and ``State`` may be left out):

* ``JobID``: the job's id (``123``, ``123_4`` for an array task); a step row (``123.batch``,
  ``123.0``, ``123.extern``) is skipped, which ``--allocations`` already does.
* ``Submit``, ``Start``, ``End``: ``YYYY-MM-DDTHH:MM:SS`` (Slurm's ISO format). Arrival is
  ``Submit`` minus the earliest ``Submit`` of the file; the duration is ``End - Start``.
* ``AllocTRES``: the allocated TRES, ``billing=16,cpu=128,gres/gpu=16,mem=512G,node=2``; the GPUs are
  ``gres/gpu`` (the sum over ``gres/gpu:TYPE`` when only typed counts are given).
* ``NodeList``: Slurm's host list (``gpu[01-03,07],login1``), the job's hosts in order: the trace's
  placement (``TraceJob.hosts``), kept where the topology's hosts carry those labels.
* ``State``: rows whose job never ran (``PENDING``, ``RUNNING``, no ``Start`` or no ``End``, ``Unknown``,
  ``None``) or held no GPU (``gres/gpu`` absent or 0) are skipped and counted in the notes: a trace of
  GPU jobs that ran.

The model of a job (in this order): ``model=NAME`` in its ``Comment`` (``sbatch --comment
"model=bert"``: the same place ``commsched slurm prolog`` reads; a name the zoo does not know is
refused), else its ``JobName`` through :data:`SLURM` (zoo model names and families, by prefix: a
``gpt-7b-sft`` job is ``gpt3-crux``), else ``default_model`` (``bert-base``), counted in the notes.
A row that is malformed (a missing field, a time that does not parse, an end before its start, a
host list that does not expand, a job id given twice) is refused with its line
(``FILE:LINE: FIELD``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import MappingProxyType

from commsched.errors import InputError
from commsched.workload.records import JobId
from commsched.workload.traces.csvio import read_text
from commsched.workload.traces.labels import LabelMap
from commsched.workload.traces.records import Trace, TraceJob
from commsched.workload.zoo import get_model

__all__ = ["SACCT_FIELDS", "SLURM", "comment_fields", "expand_hostlist", "load_slurm_trace", "tres_gpus"]

#: the fields the reader needs (``Comment`` and ``State`` are optional)
SACCT_FIELDS = ("JobID", "JobName", "Submit", "Start", "End", "AllocTRES", "NodeList")
_OPTIONAL = ("State", "Comment")
_NEVER_RAN = {"", "unknown", "none"}
_NOT_DONE = ("PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED")

#: job names -> zoo models: a job name that starts with a zoo family's name is that family's model
SLURM = LabelMap(
    name="slurm",
    default="bert-base",
    table=MappingProxyType({}),
    prefixes=(
        ("gpt", "gpt3-crux"),
        ("llama", "gpt3-crux"),
        ("bertlarge", "bert-large"),
        ("bert", "bert-base"),
        ("resnet101", "resnet101"),
        ("resnet18", "resnet18"),
        ("resnet", "resnet50"),
        ("vgg19", "vgg19"),
        ("vgg", "vgg16"),
        ("alexnet", "alexnet"),
        ("inception", "inception_v3"),
        ("gnmt", "gnmt"),
        ("nmt", "gnmt"),
        ("transformer", "transformer"),
        ("moe", "moe-simai"),
        ("dlrm", "dlrm"),
    ),
)

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(expr: str) -> tuple[str, ...]:
    """Slurm's host list expression as host names, in order (``scontrol show hostnames``).

    Raises :class:`ValueError` on a malformed expression.

    Examples
    --------
    >>> expand_hostlist("gpu[01-03,07],login1")
    ('gpu01', 'gpu02', 'gpu03', 'gpu07', 'login1')
    >>> expand_hostlist("n[1-2]-ib[0-1]")
    ('n1-ib0', 'n1-ib1', 'n2-ib0', 'n2-ib1')
    >>> expand_hostlist("vm")
    ('vm',)
    """
    out: list[str] = []
    for part in _split_top(expr.strip()):
        out.extend(_expand_one(part))
    if not out:
        raise ValueError(f"empty host list {expr!r}")
    return tuple(out)


def _split_top(expr: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in {expr!r}")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if depth != 0:
        raise ValueError(f"unbalanced '[' in {expr!r}")
    parts.append(cur)
    if any(not p for p in parts):
        raise ValueError(f"empty host name in {expr!r}")
    return parts


def _expand_one(part: str) -> list[str]:
    start = part.find("[")
    if start < 0:
        if "]" in part:
            raise ValueError(f"unbalanced ']' in {part!r}")
        return [part]
    end = part.index("]", start)
    head, body, tail = part[:start], part[start + 1 : end], part[end + 1 :]
    names: list[str] = []
    for r in body.split(","):
        m = _RANGE.match(r.strip())
        if m is None:
            raise ValueError(f"bad range {r!r} in {part!r}")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo) or int(hi) - int(lo) > 100_000:
            raise ValueError(f"bad range {r!r} in {part!r}")
        width = len(lo) if lo.startswith("0") else 0
        names += [f"{head}{i:0{width}d}" for i in range(int(lo), int(hi) + 1)]
    rest = _expand_one(tail) if tail else [""]
    return [n + t for n in names for t in rest]


def tres_gpus(tres: str) -> int:
    """The GPUs of a TRES string (``AllocTRES``): ``gres/gpu``, else the sum of ``gres/gpu:TYPE``.

    Raises :class:`ValueError` on a count that is not a non-negative integer.

    Examples
    --------
    >>> tres_gpus("billing=16,cpu=128,gres/gpu=16,mem=512G,node=2")
    16
    >>> tres_gpus("cpu=4,gres/gpu:h200=2,gres/gpu:a100=1")
    3
    >>> tres_gpus("cpu=4,mem=1G")
    0
    """
    plain: int | None = None
    typed = 0
    for item in filter(None, (x.strip() for x in tres.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"bad TRES item {item!r}")
        if key == "gres/gpu" or key.startswith("gres/gpu:"):
            if not value.isdigit():
                raise ValueError(f"bad GPU count {item!r}")
            if key == "gres/gpu":
                plain = int(value)
            else:
                typed += int(value)
    return plain if plain is not None else typed


def comment_fields(comment: str) -> dict[str, str]:
    """``KEY=VALUE`` words of a job's comment (``"model=bert compute_s=0.2"``); other words ignored.

    An optional ``commsched:`` before the words is dropped.

    >>> comment_fields("commsched: model=bert comm_bytes=4e8 nightly")
    {'model': 'bert', 'comm_bytes': '4e8'}
    """
    text = comment.strip()
    if text.lower().startswith("commsched:"):
        text = text[len("commsched:") :]
    out: dict[str, str] = {}
    for word in re.split(r"[\s;]+", text):
        key, sep, value = word.partition("=")
        if sep and key and value:
            out[key.strip().lower()] = value.strip()
    return out


def _time(value: str, where: str) -> datetime:
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        raise InputError(f"{value!r}", where=where, expected="YYYY-MM-DDTHH:MM:SS (sacct's time)") from None


def _model(fields: dict[str, str], where: str, counted: Counter[str], default: str) -> tuple[str, str]:
    wanted = comment_fields(fields.get("Comment", "")).get("model")
    if wanted is not None:
        try:
            get_model(wanted, where=f"{where}: Comment")
        except Exception:
            raise InputError(
                f"model {wanted!r} is not in the zoo", where=f"{where}: Comment", expected="commsched models"
            ) from None
        return wanted, f"comment:{wanted}"
    name = fields["JobName"]
    found = SLURM.lookup(name)
    if found is not None:
        return found, name
    counted[name if len(counted) < 50 else "..."] += 1
    return default, name


@dataclass(slots=True, kw_only=True)
class _Row:
    job: str
    submit: datetime
    duration_s: float
    gpus: int
    hosts: tuple[str, ...]
    model: str = ""
    source: str = ""


def _row(f: dict[str, str], where: str, skipped: Counter[str]) -> _Row | None:
    """One allocation's row checked (``None``: skipped, counted in ``skipped``)."""
    job = f["JobID"]
    if not re.fullmatch(r"\d+(_\d+|_\[[\d,\-%]+\])?(\+\d+)?", job):
        raise InputError(f"JobID {job!r}", where=f"{where}: JobID", expected="a Slurm job id (123, 123_4)")
    state = f.get("State", "COMPLETED").split(" ")[0].upper()
    if state.startswith(_NOT_DONE) or f["Start"].lower() in _NEVER_RAN or f["End"].lower() in _NEVER_RAN:
        skipped["never ran or not ended"] += 1
        return None
    submit = _time(f["Submit"], f"{where}: Submit")
    start = _time(f["Start"], f"{where}: Start")
    end = _time(f["End"], f"{where}: End")
    if start < submit or end < start:
        raise InputError(
            f"Submit {f['Submit']}, Start {f['Start']}, End {f['End']}",
            where=f"{where}: End" if end < start else f"{where}: Start",
            expected="Submit <= Start <= End",
        )
    try:
        gpus = tres_gpus(f["AllocTRES"])
    except ValueError as exc:
        raise InputError(str(exc), where=f"{where}: AllocTRES", expected="KEY=COUNT,...") from None
    try:
        hosts = expand_hostlist(f["NodeList"])
    except ValueError as exc:
        raise InputError(str(exc), where=f"{where}: NodeList", expected="a Slurm host list") from None
    if gpus == 0:
        skipped["no GPU (AllocTRES has no gres/gpu)"] += 1
        return None
    duration = max((end - start).total_seconds(), 1.0)
    return _Row(job=job, submit=submit, duration_s=duration, gpus=gpus, hosts=hosts)


def load_slurm_trace(path: str | Path, default_model: str = "bert-base") -> Trace:
    """The jobs of a ``sacct --parsable2`` file (see the module docstring for the fields and rules).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "sacct.txt"
    >>> _ = f.write_text("JobID|JobName|Submit|Start|End|AllocTRES|NodeList|State|Comment\\n"
    ...     "7|gpt-sft|2026-11-01T00:00:00|2026-11-01T00:00:05|2026-11-01T01:00:05|cpu=8,gres/gpu=16,node=2"
    ...     "|gpu[01-02]|COMPLETED|\\n"
    ...     "7.batch|batch|2026-11-01T00:00:00|2026-11-01T00:00:05|2026-11-01T01:00:05|cpu=8|gpu01|"
    ...     "COMPLETED|\\n"
    ...     "8|x|2026-11-01T00:01:00|2026-11-01T00:01:00|2026-11-01T00:02:00|cpu=1,gres/gpu=1|gpu03|FAILED"
    ...     "|model=resnet50\\n")
    >>> [(j.id, j.arrival_s, j.duration_s, j.gpus, j.model, j.hosts) for j in load_slurm_trace(f).jobs]
    [('7', 0.0, 3600.0, 16, 'gpt3-crux', ('gpu01', 'gpu02')), ('8', 60.0, 60.0, 1, 'resnet50', ('gpu03',))]
    """
    p = Path(path)
    get_model(default_model, where="trace.default_model")
    lines = read_text(p, "sacct output").splitlines()
    header = lines[0].split("|") if lines else []
    missing = [c for c in SACCT_FIELDS if c not in header]
    if missing:
        raise InputError(
            f"sacct header lacks field(s) {', '.join(missing)}",
            where=f"{p}:1",
            expected="sacct --parsable2 --format " + ",".join((*SACCT_FIELDS, *_OPTIONAL)),
        )
    rows: list[_Row] = []
    skipped: Counter[str] = Counter()
    unmapped: Counter[str] = Counter()
    seen: set[str] = set()
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        values = line.split("|")
        where = f"{p}:{n}"
        if len(values) != len(header):
            raise InputError(
                f"{len(values)} fields for {len(header)} columns", where=where, expected="one per column"
            )
        f = dict(zip(header, (v.strip() for v in values), strict=True))
        if "." in f["JobID"]:  # a step (batch, extern, 0, ...): the allocation's row holds the job
            continue
        row = _row(f, where, skipped)
        if row is None:
            continue
        if row.job in seen:
            raise InputError(
                f"job {row.job} given twice", where=f"{where}: JobID", expected="one row per job"
            )
        seen.add(row.job)
        row.model, row.source = _model(f, where, unmapped, default_model)
        rows.append(row)
    if not rows:
        raise InputError("no GPU job that ran", where=str(p), expected="rows with Start, End and gres/gpu")
    t0 = min(r.submit for r in rows)
    jobs = [
        TraceJob(id=JobId(r.job), arrival_s=(r.submit - t0).total_seconds(), duration_s=r.duration_s,
                 gpus=r.gpus, model=r.model, source=r.source, hosts=r.hosts)
        for r in rows
    ]  # fmt: skip
    jobs.sort(key=lambda j: (j.arrival_s, j.id))
    notes = [f"{len(jobs)} job(s) from {p.name}"]
    notes += [f"{v} row(s) skipped: {k}" for k, v in sorted(skipped.items())]
    if unmapped:
        notes.append(f"{sum(unmapped.values())} job name(s) not mapped -> {default_model}")
    return Trace(name=p.stem, source=str(p), jobs=tuple(jobs), notes=tuple(notes))
