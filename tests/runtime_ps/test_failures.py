"""A vanished worker fails the others within the timeout; malformed messages are rejected cleanly."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from commsched.runtime.ps import frame
from commsched.runtime.ps.client import PSClient
from commsched.runtime.ps.errors import PSError
from commsched.runtime.ps.frame import Kind
from commsched.runtime.ps.launch import local_job_env
from commsched.runtime.ps.transports import TransportConfig
from tests.runtime_ps.conftest import servers


def _raw_worker(address: tuple[str, int], rank: int, workers: int) -> socket.socket:
    s = socket.create_connection(address)
    s.sendall(frame.encode(Kind.HELLO, key=rank, offset=workers))
    return s


@pytest.mark.parametrize("transport", ["fifo", "mercury"])
def test_truncated_push_fails_the_job_never_a_wrong_sum(
    transport: str, small_config: Callable[[str], TransportConfig]
) -> None:
    x = np.arange(2000, dtype=np.float32)
    with servers(1, 2) as srv:
        c = PSClient(servers=[srv[0].address], rank=0, num_workers=2, transport=small_config(transport))
        try:
            h = c.push_pull_async(x, name="g")
            rogue = _raw_worker(srv[0].address, 1, 2)
            rogue.sendall(frame.encode(Kind.INIT, key=0, offset=4096))
            kind = Kind.PUSHPULL if transport == "mercury" else Kind.PUSH
            rogue.sendall(frame.encode(kind, key=0, offset=0, length=4096) + b"\0" * 100)  # then dies
            rogue.close()
            t0 = time.monotonic()
            with pytest.raises(PSError, match=r"worker 1 failed.*truncated"):
                h.wait(10)
            assert time.monotonic() - t0 < 5
        finally:
            c.close()


def test_malformed_message_is_rejected_and_other_keys_stay_right(
    small_config: Callable[[str], TransportConfig],
) -> None:
    x = np.arange(1024, dtype=np.float32)
    with servers(1, 2) as srv:
        c = PSClient(servers=[srv[0].address], rank=0, num_workers=2, transport=small_config("fifo"))
        rogue = _raw_worker(srv[0].address, 1, 2)
        try:
            h = c.push_pull_async(x, name="g")  # key 0, one 4096-byte part
            rogue.sendall(frame.encode(Kind.INIT, key=0, offset=4096))
            # out of bounds, undeclared key, wrong size: each rejected with an ERROR, nothing summed
            bad = [frame.encode(Kind.PUSH, key=0, offset=8, length=4096) + b"\1" * 4096,
                   frame.encode(Kind.PUSH, key=99, offset=0, length=8) + b"\1" * 8,
                   frame.encode(Kind.PUSH, key=0, offset=0, length=8) + b"\1" * 8]  # fmt: skip
            replies = frame.Reader(rogue)
            for msg in bad:
                rogue.sendall(msg)
                hdr = replies.header()
                reason = bytes(replies.payload(hdr.length))
                assert hdr.kind == Kind.ERROR and b"rejected PUSH" in reason
            ones = np.ones(1024, np.float32)
            rogue.sendall(frame.encode(Kind.PUSH, key=0, offset=0, length=4096) + ones.tobytes())
            rogue.sendall(frame.encode(Kind.PULL, key=0))
            assert replies.header().kind == Kind.ACK
            hdr = replies.header()
            data = replies.payload(hdr.length)
            assert hdr.kind == Kind.DATA
            np.testing.assert_array_equal(np.frombuffer(data, np.float32), x + 1)
            np.testing.assert_array_equal(h.wait(5), x + 1)
        finally:
            rogue.close()
            c.close()


def test_garbage_header_fails_the_job(small_config: Callable[[str], TransportConfig]) -> None:
    with servers(1, 2) as srv:
        c = PSClient(servers=[srv[0].address], rank=0, num_workers=2, transport=small_config("mercury"))
        try:
            h = c.push_pull_async(np.ones(10, np.float32), name="g")
            rogue = _raw_worker(srv[0].address, 1, 2)
            rogue.sendall(b"\xff" * frame.HEADER_BYTES)
            with pytest.raises(PSError, match="unknown message kind"):
                h.wait(5)
            rogue.close()
        finally:
            c.close()


@pytest.mark.slow
def test_killed_worker_process_fails_the_others(tmp_path: Path) -> None:
    """Real processes: kill -9 one worker mid-iteration; the other exits with a one-line error."""
    spec = tmp_path / "spec.json"
    layer = {"name": "g", "elements": 2_000_000, "fp_s": 0.0, "bp_s": 0.0}
    spec.write_text(json.dumps({"layers": [layer], "iterations": 1000, "warmup": 0}))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    py = [sys.executable, "-m", "commsched.runtime.ps"]
    base = {**os.environ, "COMMSCHED_PS_TIMEOUT": "10", "COMMSCHED_PS_TRANSPORT": "mercury"}
    procs: list[subprocess.Popen[str]] = []
    workers: list[subprocess.Popen[str]] = []
    try:
        for role in ("scheduler", "server"):
            env = {**base, **local_job_env(role=role, port=port, num_workers=2, num_servers=1)}
            procs.append(subprocess.Popen([*py, "role"], env=env, stderr=subprocess.PIPE, text=True))
        for rank in range(2):
            env = {**base, **local_job_env(role="worker", port=port, num_workers=2, num_servers=1, rank=rank)}
            emulate = [sys.executable, "-m", "commsched.experiments.ps", "emulate", str(spec)]
            workers.append(subprocess.Popen(emulate, env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True))  # fmt: skip
        procs[0].wait(timeout=60)  # the scheduler exits once both workers registered
        time.sleep(2.0)  # well into the run
        assert workers[1].poll() is None
        workers[1].send_signal(signal.SIGKILL)
        t0 = time.monotonic()
        _, err = workers[0].communicate(timeout=15)
        assert time.monotonic() - t0 < 12
        assert workers[0].returncode == 1
        assert "worker 1 failed" in err and "Traceback" not in err
        _, serr = procs[1].communicate(timeout=10)
        assert procs[1].returncode == 1 and "worker 1 failed" in serr
    finally:
        for p in procs + workers:
            if p.poll() is None:
                p.kill()
            p.communicate()  # also closes the pipes
