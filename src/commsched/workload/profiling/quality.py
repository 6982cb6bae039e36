"""Checks on a measured profile: how far its timed iterations spread, what it leaves out.

The *spread* of the timed iterations is ``(max - min) / median`` of their compute time (forward +
backward): 0 for identical iterations; above :data:`SPREAD_WARNING` (0.5) the medians are suspect (a
loaded machine, too few threads, a step that changes from one iteration to the next) and the profile
carries a warning.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

#: the spread above which a profile carries a warning
SPREAD_WARNING = 0.5


def spread(forward_all: Sequence[float], backward_all: Sequence[float]) -> float | None:
    """``(max - min) / median`` of the per-iteration compute times (``None`` with fewer than two).

    Examples
    --------
    >>> spread([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])  # totals 2, 3, 4: (4 - 2) / 3
    0.6666666666666666
    >>> spread([1.0], [2.0]) is None
    True
    """
    total = [f + b for f, b in zip(forward_all, backward_all, strict=True)]
    if len(total) < 2:
        return None
    mid = statistics.median(total)
    return (max(total) - min(total)) / mid if mid > 0 else 0.0


def spread_warnings(forward_all: Sequence[float], backward_all: Sequence[float]) -> tuple[str, ...]:
    """One warning line where the timed iterations spread more than :data:`SPREAD_WARNING`."""
    s = spread(forward_all, backward_all)
    if s is None or s <= SPREAD_WARNING:
        return ()
    total = [f + b for f, b in zip(forward_all, backward_all, strict=True)]
    return (
        f"the timed iterations spread by {s:.0%} of their median ({min(total):.4g} s to {max(total):.4g} s): "
        "the medians are noisy (a loaded machine?); measure again with more iterations or on a quiet machine",
    )


def left_out_warnings(unused: Sequence[str], frozen: Sequence[str]) -> tuple[str, ...]:
    """Warning lines for parameters that get no gradient and for frozen ones (not in ``sync_bytes``)."""
    out = []
    for names, what in (
        (unused, "got no gradient in the step"),
        (frozen, "are frozen (requires_grad=False)"),
    ):
        if names:
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            out.append(f"{len(names)} parameter tensor(s) {what}: {shown}; not counted in sync_bytes")
    return tuple(out)
