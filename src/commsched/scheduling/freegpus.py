"""The free GPUs of a cluster, indexed for placement: a request costs ``O(log hosts)``, not a scan.

:class:`FreeGpus` is a read-only :class:`~collections.abc.Set` of GPU ids, so every placement policy can
use it where it used a ``frozenset``, and it answers the questions placements ask in logarithmic time:
the first host (topology order) or the first ToR with ``n`` free GPUs, the first ``n`` free GPUs, the
host or ToR with the fewest free GPUs that still holds ``n`` (best fit). Its owner (the simulator's job
lifecycle, or any caller of :func:`~commsched.scheduling.inorder.place_in_order`) takes and gives back
GPUs between requests with :meth:`take` and :meth:`give`; a policy reads it only during a request.

Hosts are grouped by their first ToR (``""`` for hosts without one), groups in the order of their first
host, as :func:`~commsched.scheduling.jobsched.common.by_key` groups them.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Set

from commsched.scheduling.interfaces import PlacementRequest
from commsched.topology import NodeId, Topology


class _MaxTree:
    """Leftmost index whose value is at least a bound, over a fixed-size array (a max segment tree)."""

    __slots__ = ("_size", "_tree")

    def __init__(self, values: list[int]) -> None:
        size = 1
        while size < max(1, len(values)):
            size *= 2
        self._size = size
        self._tree = [0] * (2 * size)
        self._tree[size : size + len(values)] = values
        for i in range(size - 1, 0, -1):
            self._tree[i] = max(self._tree[2 * i], self._tree[2 * i + 1])

    def set(self, i: int, value: int) -> None:
        i += self._size
        self._tree[i] = value
        i //= 2
        while i:
            self._tree[i] = max(self._tree[2 * i], self._tree[2 * i + 1])
            i //= 2

    def first_at_least(self, bound: int, start: int = 0) -> int:
        """The leftmost index ``>= start`` whose value is ``>= bound`` (-1 if none)."""
        return self._find(1, 0, self._size, bound, start)

    def _find(self, node: int, lo: int, hi: int, bound: int, start: int) -> int:
        if hi <= start or self._tree[node] < bound:
            return -1
        if hi - lo == 1:
            return lo
        mid = (lo + hi) // 2
        left = self._find(2 * node, lo, mid, bound, start)
        return left if left >= 0 else self._find(2 * node + 1, mid, hi, bound, start)


class FreeGpus(Set[NodeId]):
    """The free GPUs of ``topology`` (all of them unless ``free`` says which), indexed for placement.

    Examples
    --------
    >>> from commsched.topology import two_layer_clos
    >>> topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=2)
    >>> free = FreeGpus(topo)
    >>> free.take(topo.hosts[0].gpus[:6])
    >>> (len(free), free.first_host(4), free.host_free(0))
    (26, 1, ('h0/gpu6', 'h0/gpu7'))
    >>> free.best_fit_host(2)  # the host with the fewest free GPUs that holds 2
    0
    >>> [str(g) for g in free.first_free(3)]
    ['h0/gpu6', 'h0/gpu7', 'h1/gpu0']
    """

    def __init__(self, topology: Topology, free: Iterable[NodeId] | None = None) -> None:
        self.topology = topology
        self.hosts = topology.hosts
        self._pos = {g: (h, k) for h, host in enumerate(self.hosts) for k, g in enumerate(host.gpus)}
        self._flags = [bytearray(len(host.gpus)) for host in self.hosts]
        self._count = [0] * len(self.hosts)
        keys = [str(host.tors[0]) if host.tors else "" for host in self.hosts]
        self.groups: list[str] = list(dict.fromkeys(keys))
        gindex = {k: i for i, k in enumerate(self.groups)}
        self._group_of = [gindex[k] for k in keys]
        self.group_hosts: list[list[int]] = [[] for _ in self.groups]
        for h, g in enumerate(self._group_of):
            self.group_hosts[g].append(h)
        self._gcount = [0] * len(self.groups)
        self._total = 0
        self._hosts_tree = _MaxTree(self._count)
        self._groups_tree = _MaxTree(self._gcount)
        self._by_count: dict[int, list[tuple[str, int]]] = {}  # free count -> sorted (host id, position)
        for h, host in enumerate(self.hosts):
            self._file(h, 0, str(host.id))
        self.give(topology.gpus if free is None else free)

    # ------------------------------------------------------------------ the Set protocol
    def __contains__(self, gpu: object) -> bool:
        where = self._pos.get(gpu)  # type: ignore[call-overload]
        return where is not None and bool(self._flags[where[0]][where[1]])

    def __len__(self) -> int:
        return self._total

    def __iter__(self) -> Iterator[NodeId]:
        for h in self._nonempty():
            yield from self.host_free(h)

    # ------------------------------------------------------------------ updates
    def take(self, gpus: Iterable[NodeId]) -> None:
        """Mark GPUs busy (unknown or busy ones are ignored)."""
        self._update(gpus, 0)

    def give(self, gpus: Iterable[NodeId]) -> None:
        """Mark GPUs free (unknown or free ones are ignored)."""
        self._update(gpus, 1)

    def _update(self, gpus: Iterable[NodeId], flag: int) -> None:
        touched: dict[int, int] = {}
        for g in gpus:
            where = self._pos.get(g)
            if where is None or self._flags[where[0]][where[1]] == flag:
                continue
            h, k = where
            self._flags[h][k] = flag
            touched.setdefault(h, self._count[h])
            delta = 1 if flag else -1
            self._count[h] += delta
            self._gcount[self._group_of[h]] += delta
            self._total += delta
        for h, before in touched.items():
            self._unfile(h, before, str(self.hosts[h].id))
            self._file(h, self._count[h], str(self.hosts[h].id))
            self._hosts_tree.set(h, self._count[h])
            grp = self._group_of[h]
            self._groups_tree.set(grp, self._gcount[grp])

    def _file(self, h: int, count: int, hid: str) -> None:
        insort(self._by_count.setdefault(count, []), (hid, h))

    def _unfile(self, h: int, count: int, hid: str) -> None:
        bucket = self._by_count[count]
        del bucket[bisect_left(bucket, (hid, h))]

    # ------------------------------------------------------------------ queries
    def host_count(self, h: int) -> int:
        return self._count[h]

    def group_count(self, g: int) -> int:
        return self._gcount[g]

    def host_free(self, h: int) -> tuple[NodeId, ...]:
        """The free GPUs of host ``h`` (topology position), in host order."""
        flags = self._flags[h]
        return tuple(g for g, f in zip(self.hosts[h].gpus, flags, strict=True) if f)

    def first_host(self, n: int) -> int:
        """The first host (topology order) with at least ``n`` free GPUs; -1 if none."""
        return self._hosts_tree.first_at_least(n)

    def first_group(self, n: int) -> int:
        """The first ToR group with at least ``n`` free GPUs; -1 if none."""
        return self._groups_tree.first_at_least(n)

    def best_fit_host(self, n: int) -> int:
        """The host with the fewest free GPUs that still has ``n`` (ties: smallest host id); -1 if none."""
        fits = [c for c, bucket in self._by_count.items() if c >= max(n, 1) and bucket]
        return self._by_count[min(fits)][0][1] if fits else -1

    def first_free(self, n: int, hosts: Iterable[int] | None = None) -> tuple[NodeId, ...]:
        """The first ``n`` free GPUs in topology order (of ``hosts`` when given, in their order)."""
        out: list[NodeId] = []
        for h in self._nonempty() if hosts is None else hosts:
            if len(out) >= n:
                break
            if self._count[h]:
                out.extend(self.host_free(h)[: n - len(out)])
        return tuple(out)

    def _nonempty(self) -> Iterator[int]:
        h = self._hosts_tree.first_at_least(1)
        while h >= 0:
            yield h
            h = self._hosts_tree.first_at_least(1, h + 1)


def free_index(req: PlacementRequest) -> FreeGpus:
    """The request's free GPUs as an index: its own when it is one, else one built from them."""
    free = req.free_gpus
    if isinstance(free, FreeGpus) and free.topology is req.topology:
        return free
    return FreeGpus(req.topology, free)
