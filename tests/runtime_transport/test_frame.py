"""Wire format: every valid header round-trips; every corruption of a field is rejected."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from commsched.errors import ProtocolError
from commsched.runtime.transport.frame import (
    HEADER,
    HEADER_BYTES,
    MAX_CONTROL_BYTES,
    FrameHeader,
    FrameKind,
    decode_header,
    encode_header,
)

headers = st.builds(
    lambda kind, seq, step, length: FrameHeader(
        kind=kind, seq=seq, step=step, length=length if kind is FrameKind.DATA else length % MAX_CONTROL_BYTES
    ),
    st.sampled_from(list(FrameKind)),
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**63),
)


@given(headers)
def test_round_trip(h: FrameHeader) -> None:
    raw = encode_header(h)
    assert len(raw) == HEADER_BYTES == 24
    assert decode_header(raw) == h


@given(headers, st.integers(0, 7), st.integers(1, 255))
def test_corrupting_magic_version_kind_or_flags_is_rejected(h: FrameHeader, pos: int, delta: int) -> None:
    raw = bytearray(encode_header(h))
    raw[pos] = (raw[pos] + delta) % 256
    assume(not (pos == 5 and raw[5] in FrameKind._value2member_map_))  # another valid kind
    with pytest.raises(ProtocolError):
        decode_header(raw)


def test_truncated_header_is_rejected() -> None:
    with pytest.raises(ProtocolError, match="header of 23 bytes"):
        decode_header(encode_header(FrameHeader(kind=FrameKind.BYE))[:23])


def test_oversized_control_frame_is_rejected() -> None:
    with pytest.raises(ProtocolError, match="HELLO frame of 4097 bytes"):
        decode_header(HEADER.pack(b"CSXF", 1, 1, 0, 0, 0, MAX_CONTROL_BYTES + 1))
