"""Fault injection: dead or silent peers give a clear error within the timeout; bad frames are rejected."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from commsched.errors import PeerError, ProtocolError
from commsched.runtime import Options, StoreServer, init
from commsched.runtime.transport.collectives import recv
from commsched.runtime.transport.frame import HEADER, FrameHeader, FrameKind, encode_header
from commsched.runtime.transport.group import Group, GroupConfig
from commsched.runtime.transport.sockets import make_listener

PEER = """
import sys, time, numpy as np
from commsched.runtime import Options, init
host, port = sys.argv[1], int(sys.argv[2])
with init(job="csx-fault", rank=1, world_size=2, store=(host, port), options=Options(timeout_s=20)) as c:
    c.all_reduce(np.ones(1000))
    print("ready", flush=True)
    time.sleep(120)
"""


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_dead_or_silent_peer_is_a_clear_error_not_a_hang(how: str) -> None:
    timeout_s = 2.0
    with StoreServer() as store:
        proc = subprocess.Popen(
            [sys.executable, "-c", PEER, *map(str, store.address)], stdout=subprocess.PIPE, text=True
        )
        try:
            opts = Options(timeout_s=timeout_s)
            with init(job="csx-fault", rank=0, world_size=2, store=store.address, options=opts) as c:
                np.testing.assert_array_equal(c.all_reduce(np.ones(1000)), np.full(1000, 2.0))
                assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
                proc.send_signal(signal.SIGKILL if how == "kill" else signal.SIGSTOP)
                t0 = time.monotonic()
                with pytest.raises(PeerError, match=r"rank 1 of job csx-fault \(127\.0\.0\.1:\d+\)") as info:
                    c.all_reduce(np.ones(4 << 20))  # 32 MiB: more than the socket buffers hold
                elapsed = time.monotonic() - t0
        finally:
            proc.kill()
            proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()
    if how == "kill":
        assert elapsed < timeout_s, f"a killed peer must fail fast, took {elapsed:.2f} s"
        assert "closed the connection" in str(info.value) or "reset" in str(info.value).lower()
    else:
        assert timeout_s * 0.9 <= elapsed < 3 * timeout_s + 1, elapsed
        assert "within 2.0 s" in str(info.value)


def _lone_rank(timeout_s: float = 2.0) -> Group:
    """Rank 0 of a two-rank job whose rank 1 is played by the test with raw sockets."""
    listener = make_listener(("127.0.0.1", 0), dscp=0)
    peers = (listener.getsockname()[:2], ("127.0.0.1", 9))
    cfg = GroupConfig(job="csx-raw", rank=0, world_size=2, peers=peers, timeout_s=timeout_s)
    return Group(cfg, listener=listener)


def _hello(src: int = 1, job: str = "csx-raw", dst: int = 0) -> bytes:
    payload = json.dumps({"job": job, "src": src, "dst": dst, "world": 2}).encode()
    return encode_header(FrameHeader(kind=FrameKind.HELLO, length=len(payload))) + payload


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"JUNK" + bytes(20), "bad magic"),
        (HEADER.pack(b"CSXF", 9, 2, 0, 1, 0, 8), "wire version 9"),
        (HEADER.pack(b"CSXF", 1, 77, 0, 1, 0, 8), "unknown frame kind 77"),
        (HEADER.pack(b"CSXF", 1, 2, 0, 1, 0, 999), "length 999 (expected seq 1 step 4294967295 length 80)"),
        (HEADER.pack(b"CSXF", 1, 2, 0, 5, 0xFFFFFFFF, 80), "seq 5"),
        (HEADER.pack(b"CSXF", 1, 3, 0, 0, 0, 1 << 40), "REBIND frame of 1099511627776 bytes"),
    ],
)
def test_malformed_data_frame_is_rejected(frame: bytes, message: str) -> None:
    with _lone_rank() as g, socket.create_connection(g.listen_address) as raw:
        raw.sendall(_hello() + frame)

        with pytest.raises(ProtocolError, match="frame from rank 1 of job csx-raw") as info:
            recv(g, np.empty(10), 1)
        assert message in str(info.value)


@pytest.mark.parametrize(
    ("opening", "message"),
    [
        (b"\x00" * 24, "bad magic"),
        (_hello(job="other-job"), "job 'other-job'"),
        (_hello(dst=1), "dst 1"),
        (_hello(src=0), "src 0"),
        (encode_header(FrameHeader(kind=FrameKind.HELLO, length=3)) + b"{x]", "not JSON"),
        (encode_header(FrameHeader(kind=FrameKind.DATA, length=0)), "DATA before HELLO"),
    ],
)
def test_bad_connection_is_refused_and_the_group_keeps_working(opening: bytes, message: str) -> None:
    with _lone_rank() as g:
        with socket.create_connection(g.listen_address) as bad:
            bad.sendall(opening)
            deadline = time.monotonic() + 5
            while not g.rejected and time.monotonic() < deadline:
                time.sleep(0.01)
        assert len(g.rejected) == 1 and message in g.rejected[0]
        with socket.create_connection(g.listen_address) as good:
            x = np.arange(10.0)
            good.sendall(
                _hello() + encode_header(FrameHeader(kind=FrameKind.DATA, seq=1, step=0xFFFFFFFF, length=80))
            )
            good.sendall(x.tobytes())

            np.testing.assert_array_equal(recv(g, np.empty(10), 1), x)


def test_peer_that_never_connects_times_out() -> None:
    with _lone_rank(timeout_s=0.5) as g:
        t0 = time.monotonic()
        with pytest.raises(PeerError, match=r"did not connect within 0\.5 s"):
            recv(g, np.empty(3), 1)
        assert time.monotonic() - t0 < 2.0


def test_bye_from_peer_is_reported() -> None:
    with _lone_rank() as g, socket.create_connection(g.listen_address) as raw:
        raw.sendall(_hello() + encode_header(FrameHeader(kind=FrameKind.BYE)))

        with pytest.raises(PeerError, match=r"closed its connection \(BYE\)"):
            recv(g, np.empty(3), 1)
