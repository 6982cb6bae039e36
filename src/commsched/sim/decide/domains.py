"""The engine's contention domains: which running jobs can ever share a link (see
:mod:`commsched.scheduling.domains`), kept up to date as jobs start and leave.

A start merges the domains the new job's reach meets; a departure may split its domain, which is
recomputed from its remaining jobs only. Both cost what the domain holds, not what the cluster holds:
the index maps each link to the running jobs whose reach has it.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.sparse.csgraph import connected_components

#: domains of more jobs than this are split with a sparse connected-components search
_SPARSE_FROM = 12


class DomainIndex:
    """Owns the domains of the running jobs (by job index) and the link -> jobs index behind them.

    Examples
    --------
    >>> d = DomainIndex()
    >>> a = d.add(0, np.array([1, 2]))
    >>> b = d.add(1, np.array([5]))
    >>> c = d.add(2, np.array([2, 5]))  # meets both: one domain
    >>> sorted(d.members[c])
    [0, 1, 2]
    >>> parts = d.remove(2)  # the bridge leaves: two domains again
    >>> sorted(sorted(d.members[p]) for p in parts)
    [[0], [1]]
    """

    def __init__(self) -> None:
        self._users: dict[int, set[int]] = {}
        self._reach: dict[int, list[int]] = {}
        self._reach_ids: dict[int, NDArray[np.int64]] = {}  # the same links, as an array
        self._of: dict[int, int] = {}
        #: domain id -> indices of its jobs
        self.members: dict[int, set[int]] = {}
        self._next = 0
        #: the most jobs a domain has held (a diagnostic)
        self.largest = 0

    def domain_of(self, job: int) -> int:
        return self._of[job]

    def add(self, job: int, reach: NDArray[np.int64]) -> int:
        """A job starts: returns the id of its domain (domains it meets are merged into it)."""
        links = reach.tolist()
        met = {self._of[u] for link in links for u in self._users.get(link, ())}
        for link in links:
            self._users.setdefault(link, set()).add(job)
        self._reach[job] = links
        self._reach_ids[job] = np.asarray(reach, dtype=np.int64)
        if not met:
            return self._new({job})
        keep = max(met, key=lambda d: (len(self.members[d]), -d))
        group = self.members[keep]
        for d in met - {keep}:
            moved = self.members.pop(d)
            for i in moved:
                self._of[i] = keep
            group |= moved
        group.add(job)
        self._of[job] = keep
        self.largest = max(self.largest, len(group))
        return keep

    def remove(self, job: int) -> list[int]:
        """A job leaves: returns the ids of the domains its remaining neighbours now form."""
        d = self._of.pop(job)
        del self._reach_ids[job]
        for link in self._reach.pop(job):
            users = self._users[link]
            users.discard(job)
            if not users:
                del self._users[link]
        rest = self.members.pop(d)
        rest.discard(job)
        return [self._new(part) for part in self._parts(rest)]

    def _parts(self, jobs: set[int]) -> Iterable[set[int]]:
        """The connected groups of ``jobs`` (a breadth-first search; a sparse one for large groups)."""
        if len(jobs) > _SPARSE_FROM:
            yield from self._sparse_parts(jobs)
            return
        todo = set(jobs)
        while todo:
            start = min(todo)
            part = {start}
            frontier = [start]
            while frontier:
                i = frontier.pop()
                for link in self._reach[i]:
                    for u in self._users[link]:
                        if u not in part:
                            part.add(u)
                            frontier.append(u)
            todo -= part
            yield part

    def _sparse_parts(self, jobs: set[int]) -> Iterable[set[int]]:
        order = sorted(jobs)
        reach = [self._reach_ids[i] for i in order]
        rows = np.repeat(np.arange(len(order)), [r.size for r in reach])
        links, cols = np.unique(np.concatenate(reach), return_inverse=True)
        size = len(order) + links.size
        adj = sparse.csr_matrix(
            (np.ones(rows.size, dtype=np.int8), (rows, cols.astype(np.int64) + len(order))),
            shape=(size, size),
        )
        _, labels = connected_components(adj, directed=False)
        groups: dict[int, set[int]] = {}
        for k, i in enumerate(order):
            groups.setdefault(int(labels[k]), set()).add(i)
        yield from groups.values()

    def _new(self, jobs: set[int]) -> int:
        d = self._next
        self._next += 1
        self.members[d] = jobs
        for i in jobs:
            self._of[i] = d
        self.largest = max(self.largest, len(jobs))
        return d
