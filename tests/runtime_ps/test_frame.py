"""The buffered framing of the data path: batches of messages in, batches out, byte for byte."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

from commsched.errors import ProtocolError
from commsched.runtime.ps import frame
from commsched.runtime.ps.client import PSClient
from commsched.runtime.ps.errors import PSError
from commsched.runtime.ps.frame import Kind
from commsched.runtime.ps.transports import TransportConfig
from tests.runtime_ps.conftest import run_workers, servers


def _stream(seed: int, count: int, max_len: int) -> list[tuple[bytes, bytes]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        n = int(rng.integers(0, max_len))
        payload = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        out.append((frame.encode(Kind.PUSHPULL, key=i, offset=8 * i, length=n, priority=i % 7), payload))
    return out


def _dribble(sock: socket.socket, data: bytes, seed: int) -> None:
    """Send ``data`` in random pieces (1 byte to 3 KB), so messages straddle every boundary."""
    rng = np.random.default_rng(seed)
    i = 0
    while i < len(data):
        k = int(rng.integers(1, 3000))
        sock.sendall(data[i : i + k])
        i += k
    sock.shutdown(socket.SHUT_WR)


@pytest.mark.parametrize("size", [64, 4096, 1 << 20])
def test_reader_reassembles_messages_split_anywhere(size: int) -> None:
    msgs = _stream(seed=size, count=300, max_len=5000)
    a, b = socket.socketpair()
    with a, b:
        t = threading.Thread(target=_dribble, args=(a, b"".join(h + p for h, p in msgs), size))
        t.start()
        reader = frame.Reader(b, size=size)
        got = []
        for _ in msgs:
            hdr = reader.header()
            if hdr.length <= reader.size and hdr.key % 2:  # a view into the buffer ...
                got.append((hdr, bytes(reader.take(hdr.length))))
            else:  # ... or straight into a buffer of the caller's
                got.append((hdr, bytes(reader.payload(hdr.length))))
        t.join(10)
        with pytest.raises(ProtocolError, match="truncated"):
            reader.header()  # the peer closed: nothing more
    for (h, p), (hdr, payload) in zip(msgs, got, strict=True):
        assert hdr.pack() == h and payload == p


def test_reader_reports_a_message_cut_short() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(frame.encode(Kind.PUSH, key=1, length=1000) + b"x" * 10)
        a.shutdown(socket.SHUT_WR)
        reader = frame.Reader(b, size=256)
        hdr = reader.header()
        with pytest.raises(ProtocolError, match="truncated"):
            reader.payload(hdr.length)


def test_send_messages_survives_partial_sends() -> None:
    """Thousands of messages through a 4 KB send buffer: every byte arrives, in order."""
    msgs = _stream(seed=7, count=2000, max_len=3000)
    expected = b"".join(h + p for h, p in msgs)
    a, b = socket.socketpair()
    with a, b:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        got = bytearray()

        def drain() -> None:
            while chunk := b.recv(1 << 16):
                got.extend(chunk)

        t = threading.Thread(target=drain)
        t.start()
        frame.send_messages(a, [(h, memoryview(p) if i % 2 else p) for i, (h, p) in enumerate(msgs)])
        frame.send_messages(a, [])
        a.shutdown(socket.SHUT_WR)
        t.join(10)
    assert bytes(got) == expected


@pytest.mark.parametrize("transport", ["fifo", "mercury"])
def test_results_land_in_the_callers_buffers_every_round(transport: str) -> None:
    rng = np.random.default_rng(3)
    data = [rng.standard_normal(70_001).astype(np.float32) for _ in range(2)]
    config = TransportConfig(name=transport, partition_bytes=40_000, packet_bytes=4_000)

    def body(c: PSClient) -> list[bool]:
        out = np.empty_like(data[c.rank])
        same = []
        for it in range(3):
            res = c.push_pull(data[c.rank] * (it + 1), name="w", out=out, timeout_s=20)
            ref = data[0] * np.float32(it + 1) + data[1] * np.float32(it + 1)
            same.append(res is out and bool(np.array_equal(out, ref)))  # fp32 a + b: exact
        return same

    with servers(1, 2) as srv:
        out = run_workers(srv, 2, config, body)
    assert out == {0: [True] * 3, 1: [True] * 3}


def test_a_bad_result_buffer_is_refused() -> None:
    a = np.ones(8, np.float32)
    with servers(1, 1) as srv:

        def body(c: PSClient) -> list[str]:
            msgs = []
            for out in (np.empty(7, np.float32), np.empty(8, np.float16), a):
                with pytest.raises(PSError) as err:
                    c.push_pull(a, name="x", out=out)
                msgs.append(str(err.value))
            return msgs

        msgs = run_workers(srv, 1, TransportConfig(name="fifo"), body)[0]
    assert "shape (8,)" in msgs[0] and "float32" in msgs[1] and "overlaps" in msgs[2]
