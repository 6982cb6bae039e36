"""The framed binary wire format of the job library's data path.

Every message on a data connection is one frame: a fixed 24-byte little-endian header followed by
``length`` payload bytes. The header carries a magic, a version field and the collective's sequence
number and step, so that a receiver rejects anything that is not the frame it waits for instead of
summing garbage.

==========  =====  =========================================================================
field       type   meaning
==========  =====  =========================================================================
magic       4s     ``b"CSXF"``
version     u8     :data:`WIRE_VERSION`; a receiver rejects any other
kind        u8     :class:`FrameKind`
flags       u16    reserved, 0
seq         u32    sequence number of the collective on the group (wraps at 2**32)
step        u32    step inside the collective
length      u64    payload bytes that follow
==========  =====  =========================================================================

Examples
--------
>>> h = FrameHeader(kind=FrameKind.DATA, seq=3, step=1, length=8)
>>> decode_header(encode_header(h)) == h
True
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from commsched.errors import ProtocolError

MAGIC = b"CSXF"
WIRE_VERSION = 1
HEADER = struct.Struct("<4sBBHIIQ")
HEADER_BYTES = HEADER.size  # 24
MAX_CONTROL_BYTES = 4096
"""Largest payload of a control frame (HELLO, REBIND, BYE)."""


class FrameKind(IntEnum):
    """What a frame carries."""

    HELLO = 1
    """First frame of a connection: JSON ``{"job", "src", "dst", "world"}``."""
    DATA = 2
    """A piece of a collective's buffer."""
    REBIND = 3
    """The sender closes this connection and reopens it from another source port."""
    BYE = 4
    """The sender closes this connection for good."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameHeader:
    """One decoded frame header."""

    kind: FrameKind
    seq: int = 0
    step: int = 0
    length: int = 0


def encode_header(header: FrameHeader) -> bytes:
    """The 24 header bytes of ``header``."""
    return HEADER.pack(
        MAGIC, WIRE_VERSION, int(header.kind), 0, header.seq & 0xFFFFFFFF, header.step, header.length
    )


def decode_header(raw: bytes | bytearray | memoryview, *, where: str = "frame") -> FrameHeader:
    """Decode and validate a header; raise :class:`~commsched.errors.ProtocolError` if it is malformed.

    Examples
    --------
    >>> decode_header(b"XXXX" + bytes(20))
    Traceback (most recent call last):
    ...
    commsched.errors.ProtocolError: frame: bad magic b'XXXX' (expected b'CSXF')
    """
    if len(raw) != HEADER_BYTES:
        raise ProtocolError(f"{where}: header of {len(raw)} bytes (expected {HEADER_BYTES})")
    magic, version, kind, flags, seq, step, length = HEADER.unpack(raw)
    if magic != MAGIC:
        raise ProtocolError(f"{where}: bad magic {bytes(magic)!r} (expected {MAGIC!r})")
    if version != WIRE_VERSION:
        raise ProtocolError(f"{where}: wire version {version} (expected {WIRE_VERSION})")
    if kind not in FrameKind._value2member_map_:
        raise ProtocolError(f"{where}: unknown frame kind {kind} (expected one of 1..{len(FrameKind)})")
    if flags != 0:
        raise ProtocolError(f"{where}: reserved flags {flags:#x} set (expected 0)")
    fkind = FrameKind(kind)
    if fkind is not FrameKind.DATA and length > MAX_CONTROL_BYTES:
        raise ProtocolError(
            f"{where}: {fkind.name} frame of {length} bytes (expected at most {MAX_CONTROL_BYTES})"
        )
    return FrameHeader(kind=fkind, seq=seq, step=step, length=length)
