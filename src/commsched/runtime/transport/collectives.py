"""Collectives over a :class:`~commsched.runtime.transport.group.Group`, on NumPy buffers.

Every rank must call the same collectives in the same order with buffers of the same shape and dtype
(as with MPI, NCCL or Gloo); the frames carry a sequence number and step, so a mismatch is reported as
a :class:`~commsched.errors.ProtocolError` rather than a wrong sum.

The algorithms send exactly the bytes that :mod:`commsched.workload.collectives` schedules, so a
measured run and its simulated twin move the same traffic:

* ring all-reduce: reduce-scatter then all-gather around ``0 -> 1 -> ... -> n-1 -> 0``, each rank sends
  ``2(n-1)/n`` of the buffer [1]_;
* hierarchical ring all-reduce: intra-host ring reduce-scatter, inter-host ring all-reduce of each
  rank's shard among the ranks with the same local index (one ring per rail), intra-host all-gather;
* all-gather (ring), all-to-all (pairwise: at step ``k`` send to ``r+k``, receive from ``r-k``), and
  point-to-point send / recv.

References
----------
.. [1] P. Patarasuk and X. Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
   workstations", JPDC 69(2), 2009.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from commsched.errors import InputError
from commsched.runtime.transport.group import Group

REDUCE_OPS: dict[str, np.ufunc] = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
ALLREDUCE_ALGORITHMS = ("ring", "hierarchical_ring")
_P2P_STEP = 0xFFFFFFFF


def _flat(arr: np.ndarray[Any, Any], what: str) -> np.ndarray[Any, Any]:
    if not isinstance(arr, np.ndarray):
        raise InputError(f"{what} is a {type(arr).__name__}", where=what, expected="a numpy.ndarray")
    if not arr.flags.c_contiguous or not arr.flags.writeable:
        raise InputError(
            f"{what} is not a writable C-contiguous array", where=what, expected="np.ascontiguousarray"
        )
    return arr.reshape(-1)


def _bytes(a: np.ndarray[Any, Any]) -> memoryview:
    return a.reshape(-1).view(np.uint8).data


def _bounds(size: int, parts: int) -> list[int]:
    return [size * i // parts for i in range(parts + 1)]


def _ring_reduce_scatter(
    g: Group, flat: np.ndarray[Any, Any], ring: list[int], op: np.ufunc, *, seq: int, step0: int
) -> list[int]:
    """After it, position ``p`` of ``ring`` holds the reduced segment ``(p + 1) % m``; returns bounds."""
    m = len(ring)
    b = _bounds(flat.size, m)
    p = ring.index(g.rank)
    nxt, prv = ring[(p + 1) % m], ring[(p - 1) % m]
    for k in range(m - 1):
        s, r = (p - k) % m, (p - k - 1) % m
        fut = g.send_async(nxt, _bytes(flat[b[s] : b[s + 1]]), seq=seq, step=step0 + k)
        g.recv_reduce(prv, flat[b[r] : b[r + 1]], op, seq=seq, step=step0 + k)
        g.wait(fut)
    return b


def _ring_all_gather(
    g: Group, flat: np.ndarray[Any, Any], ring: list[int], b: list[int], *, owned: int, seq: int, step0: int
) -> None:
    """Position ``p`` starts owning segment ``(p + owned) % m``; afterwards every position has them all."""
    m = len(ring)
    p = ring.index(g.rank)
    nxt, prv = ring[(p + 1) % m], ring[(p - 1) % m]
    for k in range(m - 1):
        s, r = (p + owned - k) % m, (p + owned - k - 1) % m
        fut = g.send_async(nxt, _bytes(flat[b[s] : b[s + 1]]), seq=seq, step=step0 + k)
        g.recv_into(prv, _bytes(flat[b[r] : b[r + 1]]), seq=seq, step=step0 + k)
        g.wait(fut)


def _ring_all_reduce(
    g: Group, flat: np.ndarray[Any, Any], ring: list[int], op: np.ufunc, *, seq: int, step0: int
) -> int:
    if len(ring) > 1:
        b = _ring_reduce_scatter(g, flat, ring, op, seq=seq, step0=step0)
        _ring_all_gather(g, flat, ring, b, owned=1, seq=seq, step0=step0 + len(ring))
    return step0 + 2 * len(ring)


def all_reduce(
    g: Group, arr: np.ndarray[Any, Any], *, op: str = "sum", algorithm: str = "ring"
) -> np.ndarray[Any, Any]:
    """Reduce ``arr`` element-wise over all ranks, in place; returns ``arr``.

    Parameters
    ----------
    g
        The group.
    arr
        Writable C-contiguous array, same shape and dtype on every rank.
    op
        One of :data:`REDUCE_OPS` (NumPy ufuncs; ``sum`` is ``np.add``).
    algorithm
        ``ring`` or ``hierarchical_ring`` (uses ``g.config.ranks_per_host``).
    """
    flat = _flat(arr, "all_reduce buffer")
    if op not in REDUCE_OPS:
        raise InputError(f"unknown reduce op {op!r}", where="op", expected="one of " + ", ".join(REDUCE_OPS))
    ufunc = REDUCE_OPS[op]
    seq = g.next_seq()
    n = g.world_size
    if algorithm == "ring":
        _ring_all_reduce(g, flat, list(range(n)), ufunc, seq=seq, step0=0)
    elif algorithm == "hierarchical_ring":
        gh = g.config.ranks_per_host or 1
        if n % gh:
            raise InputError(f"ranks_per_host={gh} does not divide world size {n}", where="ranks_per_host")
        host, local = divmod(g.rank, gh)
        intra = [host * gh + i for i in range(gh)]
        inter = [h * gh + local for h in range(n // gh)]
        b = _ring_reduce_scatter(g, flat, intra, ufunc, seq=seq, step0=0) if gh > 1 else [0, flat.size]
        s = (local + 1) % gh
        _ring_all_reduce(g, flat[b[s] : b[s + 1]], inter, ufunc, seq=seq, step0=10_000)
        if gh > 1:
            _ring_all_gather(g, flat, intra, b, owned=1, seq=seq, step0=20_000)
    else:
        raise InputError(
            f"unknown all-reduce algorithm {algorithm!r}",
            where="algorithm",
            expected="one of " + ", ".join(ALLREDUCE_ALGORITHMS),
        )
    return arr


def all_gather(g: Group, arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Every rank's ``arr`` stacked in rank order: shape ``(world_size, *arr.shape)`` (ring algorithm)."""
    _flat(np.ascontiguousarray(arr), "all_gather buffer")
    out = np.empty((g.world_size, *arr.shape), dtype=arr.dtype)
    out[g.rank] = arr
    seq = g.next_seq()
    if g.world_size > 1:
        flat = out.reshape(-1)
        _ring_all_gather(
            g, flat, list(range(g.world_size)), _bounds(flat.size, g.world_size), owned=0, seq=seq, step0=0
        )
    return out


def all_to_all(g: Group, arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Personalised exchange: ``arr[j]`` goes to rank ``j``; result ``[i]`` is what rank ``i`` sent here.

    ``arr`` has shape ``(world_size, ...)``; the result has the same shape and dtype.
    """
    n = g.world_size
    if arr.ndim < 1 or arr.shape[0] != n:
        raise InputError(
            f"all_to_all buffer of shape {arr.shape}", where="all_to_all", expected=f"shape ({n}, ...)"
        )
    src_arr = np.ascontiguousarray(arr)
    out = np.empty_like(src_arr)
    out[g.rank] = src_arr[g.rank]
    seq = g.next_seq()
    futs = []
    for k in range(1, n):
        j = (g.rank + k) % n
        futs.append(g.send_async(j, _bytes(src_arr[j : j + 1]), seq=seq, step=k))
    for k in range(1, n):
        i = (g.rank - k) % n
        g.recv_into(i, _bytes(out[i : i + 1]), seq=seq, step=k)
    for fut in futs:
        g.wait(fut)
    return out


def send(g: Group, arr: np.ndarray[Any, Any], dst: int) -> None:
    """Send ``arr`` to rank ``dst`` (returns once the kernel has taken it)."""
    data = np.ascontiguousarray(arr)
    g.wait(g.send_async(dst, _bytes(data.reshape(-1)), seq=g.next_p2p(dst, sending=True), step=_P2P_STEP))


def recv(g: Group, out: np.ndarray[Any, Any], src: int) -> np.ndarray[Any, Any]:
    """Receive into ``out`` (shape and dtype as sent) from rank ``src``; returns ``out``."""
    flat = _flat(out, "recv buffer")
    if not 0 <= src < g.world_size or src == g.rank:
        raise InputError(f"source rank {src}", where="src", expected="another rank of the group")
    g.recv_into(src, _bytes(flat), seq=g.next_p2p(src, sending=False), step=_P2P_STEP)
    return out
