"""Map compressed priority levels to hardware traffic classes and DSCP values (Crux §4.3, §5.3).

A ``DscpTable`` lists the hardware traffic classes **in descending priority** (entry 0 is the
highest-priority queue), each with the DSCP code point that steers packets into it; some classes can
be *reserved* (TCP, control traffic, network diagnosis — Crux §4.3) and are skipped. Compressed level
``l`` (0 = highest, the output of ``commsched.scheduling.compression``) maps to the ``l``-th usable
class.

The default table (``default_dscp_table``) has 8 classes and no reserved class:

=====  =====  ==========
class  DSCP   name
=====  =====  ==========
0      46     EF
1      40     CS5
2      34     AF41
3      32     CS4
4      26     AF31
5      18     AF21
6      10     AF11
7      0      BE (CS0)
=====  =====  ==========

so level 0 -> DSCP 46, level 1 -> DSCP 40, ... The switches must be configured to map these code
points to strict-priority queues in the same order; the table is configuration, not a standard.

References
----------
.. [1] Crux (SIGCOMM 2024) §4.3 (few and partly reserved levels) and §5.3 (traffic class per job set
   through ``ibv_modify_qp``); crux-spec §4.1, §4.8 and §5.3.
.. [2] RFC 2474 (DSCP field), RFC 4594 (code-point names).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import SupportsIndex

from commsched.errors import InputError

__all__ = [
    "CONTROL_DSCP",
    "DEFAULT_DSCP_VALUES",
    "DscpTable",
    "default_dscp_table",
    "dscp_for_level",
    "dscp_for_levels",
    "tos_byte",
    "traffic_class_for_level",
]

DEFAULT_DSCP_VALUES: tuple[int, ...] = (46, 40, 34, 32, 26, 18, 10, 0)
#: the control class's code point (CS6, network control), above every job class: the agents put a
#: job's pure TCP ACKs there, as RoCE fabrics put their congestion notifications (Crux §4.3 reserves
#: classes for such traffic); no job is ever given it
CONTROL_DSCP = 48
"""DSCP per hardware class of the default table, highest-priority class first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DscpTable:
    """Hardware traffic classes in descending priority, their DSCP values and the reserved ones.

    Attributes
    ----------
    dscp
        ``dscp[c]`` is the DSCP code point (0..63) of hardware class ``c``; class 0 has the highest
        priority. Values must be distinct.
    reserved
        Classes that jobs may not use.

    Examples
    --------
    >>> table = DscpTable(dscp=(48, 46, 40, 0), reserved=frozenset({0}))
    >>> table.usable_classes, table.levels
    ((1, 2, 3), 3)
    >>> DscpTable(dscp=(46, 46))
    Traceback (most recent call last):
    ...
    commsched.errors.InputError: DscpTable.dscp: duplicate DSCP value 46 (expected distinct values)
    """

    dscp: tuple[int, ...]
    reserved: frozenset[int] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if len(self.dscp) == 0:
            raise InputError("no traffic class", where="DscpTable.dscp", expected="at least one DSCP value")
        for c, value in enumerate(self.dscp):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 63:
                raise InputError(f"{value!r}", where=f"DscpTable.dscp[{c}]", expected="an integer in 0..63")
        seen: set[int] = set()
        for value in self.dscp:
            if value in seen:
                raise InputError(
                    f"duplicate DSCP value {value}", where="DscpTable.dscp", expected="distinct values"
                )
            seen.add(value)
        for c in sorted(self.reserved):
            if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < len(self.dscp):
                raise InputError(
                    f"reserved class {c!r}",
                    where="DscpTable.reserved",
                    expected=f"class indices in 0..{len(self.dscp) - 1}",
                )
        if len(self.reserved) == len(self.dscp):
            raise InputError("every class is reserved", where="DscpTable.reserved", expected="a usable class")

    @property
    def usable_classes(self) -> tuple[int, ...]:
        """The classes jobs may use, highest priority first."""
        return tuple(c for c in range(len(self.dscp)) if c not in self.reserved)

    @property
    def levels(self) -> int:
        """Number ``K`` of priority levels available to compression."""
        return len(self.dscp) - len(self.reserved)


def _index(value: SupportsIndex, upper: int, where: str) -> int:
    """``value`` as an int in ``0 .. upper-1`` (Python or NumPy integer), else ``InputError``."""
    try:
        index = operator.index(value)
    except TypeError:
        index = -1
    if isinstance(value, bool) or not 0 <= index < upper:
        raise InputError(f"{value!r}", where=where, expected=f"an integer in 0..{upper - 1}")
    return index


def default_dscp_table(*, reserved: Sequence[int] = ()) -> DscpTable:
    """The default 8-class table (module docstring), optionally with some classes reserved.

    Examples
    --------
    >>> default_dscp_table().levels
    8
    >>> default_dscp_table(reserved=[0, 7]).usable_classes
    (1, 2, 3, 4, 5, 6)
    """
    return DscpTable(dscp=DEFAULT_DSCP_VALUES, reserved=frozenset(reserved))


def traffic_class_for_level(table: DscpTable, level: SupportsIndex) -> int:
    """The hardware class of compressed level ``level`` (0 = highest): the ``level``-th usable class.

    Examples
    --------
    >>> traffic_class_for_level(default_dscp_table(reserved=[0]), 0)
    1

    References
    ----------
    crux-spec §4.8 (blocks to physical classes, highest block to highest queue).
    """
    return table.usable_classes[_index(level, table.levels, "level")]


def dscp_for_level(table: DscpTable, level: SupportsIndex) -> int:
    """The DSCP code point of compressed level ``level``.

    Examples
    --------
    >>> dscp_for_level(default_dscp_table(), 0), dscp_for_level(default_dscp_table(), 7)
    (46, 0)
    >>> dscp_for_level(default_dscp_table(reserved=[0]), 0)
    40
    """
    return table.dscp[traffic_class_for_level(table, level)]


def dscp_for_levels(table: DscpTable, levels: Iterable[SupportsIndex]) -> tuple[int, ...]:
    """DSCP per job from the compressed levels per job (e.g. ``Compression.levels``).

    Examples
    --------
    >>> dscp_for_levels(default_dscp_table(), [0, 1, 0, 1])
    (46, 40, 46, 40)
    """
    usable = table.usable_classes
    return tuple(table.dscp[usable[_index(v, len(usable), f"levels[{j}]")]] for j, v in enumerate(levels))


def tos_byte(dscp: SupportsIndex) -> int:
    """The IP TOS / traffic-class byte of a DSCP value (ECN bits zero): ``dscp << 2``.

    This is what verbs' ``ah_attr.grh.traffic_class`` takes (crux-spec §5.3).

    Examples
    --------
    >>> tos_byte(46)
    184
    """
    return _index(dscp, 64, "dscp") << 2
