"""32-bit hash functions of switch ECMP, each as a scalar (bytes) and a vectorised (byte matrix) form.

* ``crc32``: the IEEE 802.3 CRC-32 of :func:`zlib.crc32`, the seed being its starting value.
* ``xor``: XOR of the big-endian 32-bit words of the message (zero-padded) and the seed, folded to
  16 bits (``h ^ (h >> 16)``), like the XOR hash modes of switch ASICs; the fold makes the source port,
  which sits in the upper half of its word, reach the low bits that select a path.
* ``murmur3``: MurmurHash3 x86_32 (Austin Appleby, public domain reference ``MurmurHash3.cpp``), the
  hash vClos uses in its ECMP collision study (``mmh3``).

The vectorised forms take a ``(n, length)`` ``uint8`` matrix (one message per row) and return ``n``
hashes equal to the scalar form row by row; they are what makes the inverse port search fast.

References
----------
vClos §2 (ECMP hash collisions, Mmh3 over the 5-tuple); Crux §5.2 (the port -> path mapping "computed
from the switches' hash algorithm").
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from commsched.registry import Registry

M32 = 0xFFFFFFFF
U32 = NDArray[np.uint32]
U64 = NDArray[np.uint64]


@dataclass(frozen=True, slots=True, kw_only=True)
class HashFunction:
    """A named hash: ``scalar(data, seed)`` and ``vector(rows, seed)``, both 32-bit unsigned."""

    name: str
    scalar: Callable[[bytes, int], int]
    vector: Callable[[NDArray[np.uint8], int], U32]


# ---------------------------------------------------------------------------------------------- CRC-32
def crc32(data: bytes, seed: int = 0) -> int:
    """CRC-32 (zlib) of ``data`` started from ``seed``.

    Examples
    --------
    >>> hex(crc32(b"123456789"))
    '0xcbf43926'
    """
    return zlib.crc32(data, seed & M32)


def _crc_table() -> U32:
    table = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        table[i] = c
    return table


def crc32_rows(rows: NDArray[np.uint8], seed: int = 0) -> U32:
    """Vectorised :func:`crc32` over the rows of a byte matrix."""
    table = _crc_table()
    crc = np.full(rows.shape[0], (~seed) & M32, dtype=np.uint32)
    for j in range(rows.shape[1]):
        crc = table[(crc ^ rows[:, j]) & 0xFF] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(M32)


# ---------------------------------------------------------------------------------------------- XOR fold
def xor_fold(data: bytes, seed: int = 0) -> int:
    """XOR of the big-endian 32-bit words of ``data`` (zero-padded) and ``seed``, folded to 16 bits.

    Examples
    --------
    >>> hex(xor_fold(bytes([0, 0, 0x12, 0x34, 0xAB, 0xCD, 0, 0])))
    '0xb9f9'
    """
    h = seed & M32
    padded = data + b"\0" * (-len(data) % 4)
    for i in range(0, len(padded), 4):
        h ^= int.from_bytes(padded[i : i + 4], "big")
    return (h ^ (h >> 16)) & 0xFFFF


def xor_fold_rows(rows: NDArray[np.uint8], seed: int = 0) -> U32:
    """Vectorised :func:`xor_fold`."""
    n, length = rows.shape
    padded = np.zeros((n, length + (-length % 4)), dtype=np.uint32)
    padded[:, :length] = rows
    h = np.full(n, seed & M32, dtype=np.uint32)
    for i in range(0, padded.shape[1], 4):
        word = (padded[:, i] << 24) | (padded[:, i + 1] << 16) | (padded[:, i + 2] << 8) | padded[:, i + 3]
        h ^= word
    return (h ^ (h >> np.uint32(16))) & np.uint32(0xFFFF)


# ---------------------------------------------------------------------------------------------- Murmur3
_C1, _C2 = 0xCC9E2D51, 0x1B873593


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & M32


def _mix_k(k: int) -> int:
    return (_rotl((k * _C1) & M32, 15) * _C2) & M32


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86_32 of ``data`` with ``seed`` (the reference algorithm, little-endian blocks).

    Examples
    --------
    >>> murmur3_32(b"", 0), hex(murmur3_32(b"hello", 0)), hex(murmur3_32(b"", 1))
    (0, '0x248bfa47', '0x514e28b7')
    """
    h = seed & M32
    n = len(data)
    nblocks = n // 4
    for i in range(nblocks):
        h ^= _mix_k(int.from_bytes(data[4 * i : 4 * i + 4], "little"))
        h = (_rotl(h, 13) * 5 + 0xE6546B64) & M32
    tail = data[4 * nblocks :]
    if tail:
        h ^= _mix_k(int.from_bytes(tail, "little"))
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


def _vrotl(x: U64, r: int) -> U64:
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & np.uint64(M32)


def _vmul(x: U64, c: int) -> U64:
    return (x * np.uint64(c)) & np.uint64(M32)  # both < 2**32: the product fits in 64 bits


def _vmix_k(k: U64) -> U64:
    return _vmul(_vrotl(_vmul(k, _C1), 15), _C2)


def murmur3_rows(rows: NDArray[np.uint8], seed: int = 0) -> U32:
    """Vectorised :func:`murmur3_32` (64-bit lanes masked to 32 bits, so nothing overflows)."""
    n, length = rows.shape
    r = rows.astype(np.uint64)
    h = np.full(n, seed & M32, dtype=np.uint64)
    nblocks = length // 4
    for i in range(nblocks):
        b = r[:, 4 * i : 4 * i + 4]
        k = b[:, 0] | (b[:, 1] << np.uint64(8)) | (b[:, 2] << np.uint64(16)) | (b[:, 3] << np.uint64(24))
        h ^= _vmix_k(k)
        h = (_vrotl(h, 13) * np.uint64(5) + np.uint64(0xE6546B64)) & np.uint64(M32)
    if length % 4:
        k = np.zeros(n, dtype=np.uint64)
        for j, col in enumerate(range(4 * nblocks, length)):
            k |= r[:, col] << np.uint64(8 * j)
        h ^= _vmix_k(k)
    h ^= np.uint64(length)
    h ^= h >> np.uint64(16)
    h = _vmul(h, 0x85EBCA6B)
    h ^= h >> np.uint64(13)
    h = _vmul(h, 0xC2B2AE35)
    h ^= h >> np.uint64(16)
    return h.astype(np.uint32)


def hash_functions() -> Registry[HashFunction]:
    """A fresh registry of the ECMP hash functions by name.

    Examples
    --------
    >>> hash_functions().names()
    ('crc32', 'xor', 'murmur3')
    """
    reg: Registry[HashFunction] = Registry("hash function")
    reg.register("crc32", HashFunction(name="crc32", scalar=crc32, vector=crc32_rows))
    reg.register("xor", HashFunction(name="xor", scalar=xor_fold, vector=xor_fold_rows))
    reg.register("murmur3", HashFunction(name="murmur3", scalar=murmur3_32, vector=murmur3_rows))
    return reg
