"""Shared pieces of the collective builders: step compaction and argument checks.

The builders live in :mod:`commsched.workload.collectives.allreduce`,
:mod:`commsched.workload.collectives.tree` and :mod:`commsched.workload.collectives.exchange`;
:mod:`commsched.workload.collectives` names them and describes the schedules.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from commsched.errors import InputError
from commsched.workload.records import CollectiveSchedule, Step

__all__ = [
    "CollectiveBuilder",
    "check_positive_int",
    "check_size",
    "compact_steps",
]


CollectiveBuilder = Callable[..., CollectiveSchedule]


def compact_steps(steps: Iterable[Step]) -> tuple[Step, ...]:
    """Merge consecutive steps with identical transfers and label (adding their repeats); drop empty."""
    out: list[Step] = []
    for s in steps:
        if not s.transfers or s.repeat <= 0:
            continue
        if out and out[-1].transfers == s.transfers and out[-1].label == s.label:
            prev = out.pop()
            out.append(Step(transfers=s.transfers, repeat=prev.repeat + s.repeat, label=s.label))
        else:
            out.append(s)
    return tuple(out)


def check_positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{name} must be a positive integer, got {value!r}", where=name, expected="int >= 1")
    return value


def check_size(size_bytes: object) -> float:
    if isinstance(size_bytes, bool) or not isinstance(size_bytes, int | float):
        raise InputError(
            f"size_bytes must be a number, got {size_bytes!r}", where="size_bytes", expected="float >= 0"
        )
    if not math.isfinite(size_bytes) or size_bytes < 0:
        raise InputError(
            f"size_bytes must be finite and >= 0, got {size_bytes!r}",
            where="size_bytes",
            expected="float >= 0",
        )
    return float(size_bytes)
