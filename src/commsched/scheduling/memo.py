"""A per-simulation store of pure results that policies reuse from one decision to the next.

Crux recomputes its decisions on every arrival and departure; most of what it computes depends only on
one job (its flows, its traffic under given routes, its solo routes) or on a pair of jobs' link
parameters (the correction factor ``k_j``), and those inputs rarely change between two decisions. The
simulation owns one :class:`Memo` and hands it to the policy in every
:class:`~commsched.scheduling.interfaces.PolicyContext`; a policy looks values up by keys that name every
input they depend on. Within one simulation a job id names one job with one placement, so a job id plus
the job's routes is a complete key for per-job values; the topology is the simulation's own.

The memo never changes a result: every value is recomputed identically when it is missing (tested: the
same decisions with and without a memo). One entry is state rather than a value: Crux's path selection
keeps its :class:`~commsched.scheduling.paths.GreedyTrail` here, which lets the next decision resume
after the jobs ranked above the one that arrived or left, with the same floating-point operations.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class Memo:
    """Values by key, computed on first use; forgets everything when it holds ``max_entries``.

    Examples
    --------
    >>> memo = Memo()
    >>> memo.get(("square", 3), lambda: 3 * 3)
    9
    >>> memo.get(("square", 3), lambda: 0)  # computed once
    9
    >>> memo.hits, memo.misses
    (1, 1)
    """

    __slots__ = ("_owned", "_values", "hits", "max_entries", "misses")

    def __init__(self, max_entries: int = 200_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._values: dict[Hashable, Any] = {}
        self._owned: dict[str, list[Hashable]] = {}  # job id -> the keys that name it second
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The value stored under ``key``; ``compute()`` it and store it when missing."""
        try:
            value: T = self._values[key]
        except KeyError:
            self.misses += 1
            if len(self._values) >= self.max_entries:
                self._values.clear()
                self._owned.clear()
            value = compute()
            self._store(key, value)
            return value
        self.hits += 1
        return value

    def put(self, key: Hashable, value: Any) -> None:
        """Store ``value`` under ``key`` (replacing what was there)."""
        if key not in self._values and len(self._values) >= self.max_entries:
            self._values.clear()
            self._owned.clear()
        self._store(key, value)

    def _store(self, key: Hashable, value: Any) -> None:
        if key not in self._values and isinstance(key, tuple) and len(key) > 1 and isinstance(key[1], str):
            self._owned.setdefault(key[1], []).append(key)
        self._values[key] = value

    def peek(self, key: Hashable) -> Any:
        """The value stored under ``key``, or ``None`` (nothing computed, no hit or miss counted)."""
        return self._values.get(key)

    def __len__(self) -> int:
        return len(self._values)

    def forget(self, job: str) -> int:
        """Forget every value whose key names ``job`` second (a job that has left: its values are never
        asked for again, and a long run must not keep them); returns how many were forgotten.

        Examples
        --------
        >>> memo = Memo()
        >>> memo.get(("flows", "a"), lambda: 1), memo.get(("flows", "b"), lambda: 2)
        (1, 2)
        >>> memo.forget("a"), len(memo)
        (1, 1)
        """
        keys = self._owned.pop(job, [])
        gone = 0
        for k in keys:
            if self._values.pop(k, None) is not None:
                gone += 1
        return gone

    def discard(self, drop: Callable[[Hashable], bool]) -> int:
        """Forget every value whose key ``drop(key)`` selects; returns how many were forgotten.

        For an owner whose records can change under the same id (the runtime daemon: a job's measured
        profile replaces its declared one), so values computed from the old record are not reused.

        Examples
        --------
        >>> memo = Memo()
        >>> memo.get(("flows", "a"), lambda: 1), memo.get(("flows", "b"), lambda: 2)
        (1, 2)
        >>> memo.discard(lambda key: key[1] == "a"), len(memo)
        (1, 1)
        """
        gone = [k for k in self._values if drop(k)]
        for k in gone:
            del self._values[k]
        return len(gone)


def maybe(memo: Memo | None, key: Hashable, compute: Callable[[], T]) -> T:
    """``memo.get(key, compute)``, or ``compute()`` when there is no memo."""
    return compute() if memo is None else memo.get(key, compute)
