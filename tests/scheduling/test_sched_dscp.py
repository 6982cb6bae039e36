"""DSCP table: compressed levels -> hardware classes -> DSCP (crux-spec §4.8, §5.3)."""

from __future__ import annotations

import numpy as np
import pytest

from commsched.errors import InputError
from commsched.scheduling.dscp import (
    DEFAULT_DSCP_VALUES,
    DscpTable,
    default_dscp_table,
    dscp_for_level,
    dscp_for_levels,
    tos_byte,
    traffic_class_for_level,
)


def test_default_table() -> None:
    table = default_dscp_table()
    assert table.levels == 8
    assert [dscp_for_level(table, level) for level in range(8)] == [46, 40, 34, 32, 26, 18, 10, 0]
    assert list(DEFAULT_DSCP_VALUES) == sorted(DEFAULT_DSCP_VALUES, reverse=True)


def test_reserved_classes_are_skipped() -> None:
    table = default_dscp_table(reserved=[0, 3])
    assert table.levels == 6
    assert table.usable_classes == (1, 2, 4, 5, 6, 7)
    assert traffic_class_for_level(table, 2) == 4
    assert dscp_for_levels(table, [0, 1, 2, 5]) == (40, 34, 26, 0)


def test_custom_table_and_numpy_levels() -> None:
    table = DscpTable(dscp=(56, 48, 24, 8), reserved=frozenset({0}))
    assert dscp_for_levels(table, np.array([2, 0, 1])) == (8, 48, 24)
    assert tos_byte(46) == 184 and tos_byte(np.int64(8)) == 32


def test_compression_output_maps_in_priority_order() -> None:
    table = default_dscp_table(reserved=[0])
    dscp = dscp_for_levels(table, list(range(table.levels)))
    assert list(dscp) == sorted(dscp, reverse=True)  # higher level -> higher DSCP in the default table


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dscp": ()}, "at least one"),
        ({"dscp": (64,)}, "0..63"),
        ({"dscp": (-1,)}, "0..63"),
        ({"dscp": (1, 1)}, "duplicate"),
        ({"dscp": (1, 2), "reserved": frozenset({2})}, "class indices"),
        ({"dscp": (1, 2), "reserved": frozenset({0, 1})}, "every class is reserved"),
    ],
)
def test_bad_tables(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InputError, match=match):
        DscpTable(**kwargs)  # type: ignore[arg-type]


def test_bad_levels() -> None:
    table = default_dscp_table(reserved=[7])
    with pytest.raises(InputError, match=r"0\.\.6"):
        dscp_for_level(table, 7)
    with pytest.raises(InputError, match=r"levels\[1\]"):
        dscp_for_levels(table, [0, -1])
    with pytest.raises(InputError, match="dscp"):
        tos_byte(99)
    with pytest.raises(InputError):
        dscp_for_level(table, True)
