"""Parts, part keys and the part -> server assignment of BytePS (default hash and mixed mode).

A tensor is cut into parts of at most ``partition_bytes`` (BytePS: 4,096,000 bytes), each keyed
``declared_key << 16 | part`` and assigned once to a server:

* ``djb2``: ``djb2(decimal string of key) % num_servers`` (BytePS's default ``BYTEPS_KEY_HASH_FN``);
* ``mixed``: the paper's split between ``k`` CPU-machine servers and ``n`` servers co-located on the
  GPU machines: a fraction ``2k(n-1) / (n^2 + kn - 2k)`` of the parts goes to the CPU servers
  (BytePS's mixed mode: a threshold on ``djb2(key) % 101``). Servers ``0..k-1`` are the CPU machines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from commsched.errors import InputError

#: BytePS's default partition size, bytes (BYTEPS_PARTITION_BYTES)
PART_BYTES = 4_096_000
#: BytePS's mixed-mode hash bound (BYTEPS_MIXED_MODE_BOUND)
MIXED_BOUND = 101
HASH_MODES: tuple[str, ...] = ("djb2", "mixed")


def djb2(value: int) -> int:
    """BytePS's ``Hash_DJB2`` on the decimal string of ``value`` (64-bit wrap-around).

    Examples
    --------
    >>> djb2(0)
    177621
    """
    h = 5381
    for ch in str(value):
        h = (h * 33 + ord(ch)) & 0xFFFFFFFFFFFFFFFF
    return h


def part_key(declared_key: int, part: int) -> int:
    """``declared_key << 16 | part`` (BytePS: "top 16 bits for different servers").

    Examples
    --------
    >>> part_key(3, 2)
    196610
    """
    if not 0 <= part < (1 << 16):
        raise InputError(f"part index {part}", where="part", expected="0 <= part < 65536")
    return (declared_key << 16) | part


def part_bounds(nbytes: int, partition_bytes: int, itemsize: int) -> list[tuple[int, int]]:
    """Byte ranges ``(start, stop)`` of the parts of an ``nbytes`` tensor (element-aligned).

    Examples
    --------
    >>> part_bounds(10, 4, 2)
    [(0, 4), (4, 8), (8, 10)]
    """
    step = max(itemsize, partition_bytes - partition_bytes % itemsize)
    return [(s, min(s + step, nbytes)) for s in range(0, max(nbytes, 1), step)] if nbytes else [(0, 0)]


def mixed_ratio(k: int, n: int) -> float:
    """Fraction of parts sent to the ``k`` CPU servers among ``n`` workers: ``2k(n-1)/(n^2+kn-2k)``.

    Examples
    --------
    >>> round(mixed_ratio(2, 4), 4)
    0.6
    """
    if k == 0:
        return 0.0
    return 2 * k * (n - 1) / (n * n + k * n - 2 * k)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerMap:
    """How part keys map to servers.

    Attributes
    ----------
    num_servers
        All servers (``cpu_servers`` CPU machines first, then co-located ones).
    mode
        ``"djb2"`` or ``"mixed"``.
    cpu_servers, num_workers
        ``k`` and ``n`` of mixed mode (``num_servers = k + n``).
    """

    num_servers: int
    mode: str = "djb2"
    cpu_servers: int = 0
    num_workers: int = 1

    def __post_init__(self) -> None:
        if self.mode not in HASH_MODES:
            raise InputError(f"hash {self.mode!r}", where="hash", expected="one of " + ", ".join(HASH_MODES))
        if self.num_servers < 1:
            raise InputError(f"{self.num_servers} servers", where="num_servers", expected=">= 1")
        if self.mode == "mixed" and self.num_servers != self.cpu_servers + self.num_workers:
            raise InputError(
                f"{self.num_servers} servers for k={self.cpu_servers}, n={self.num_workers}",
                where="num_servers",
                expected="k CPU servers + n co-located servers",
            )

    def server_of(self, key: int) -> int:
        """The server of part ``key``.

        Examples
        --------
        >>> ServerMap(num_servers=3).server_of(65536)
        0
        """
        if self.mode == "djb2":
            return djb2(key) % self.num_servers
        k, n = self.cpu_servers, self.num_workers
        h = djb2(key) % MIXED_BOUND
        if h < mixed_ratio(k, n) * MIXED_BOUND:
            return djb2(h) % k
        return k + djb2(h) % n

    def byte_shares(self, parts: Sequence[tuple[int, int]]) -> list[float]:
        """Per-server share of the bytes of ``parts`` (``(key, nbytes)`` pairs).

        Examples
        --------
        >>> ServerMap(num_servers=1).byte_shares([(0, 10), (1, 30)])
        [1.0]
        """
        load = [0] * self.num_servers
        for key, nbytes in parts:
            load[self.server_of(key)] += nbytes
        total = sum(load) or 1
        return [x / total for x in load]
