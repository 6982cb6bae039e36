"""Part keys and hashing, per-server byte shares, summation-thread balance, roles and bring-up."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from commsched.errors import InputError
from commsched.intrajob.byteps import byteps_assignment
from commsched.runtime.ps.errors import PSTimeoutError
from commsched.runtime.ps.keys import ServerMap, djb2, mixed_ratio, part_bounds, part_key
from commsched.runtime.ps.rendezvous import register, serve_scheduler, worker_assignment
from commsched.runtime.ps.roles import role_from_env
from commsched.runtime.ps.server import Server
from commsched.runtime.ps.summation import Summation


def test_djb2_is_bytes_decimal_string_hash() -> None:
    h = 5381
    for ch in "196610":
        h = h * 33 + ord(ch)
    assert djb2(part_key(3, 2)) == h


def test_part_bounds_cover_tensor() -> None:
    b = part_bounds(4_096_000 * 2 + 8, 4_096_000, 4)
    assert b[0] == (0, 4_096_000) and b[-1] == (8_192_000, 8_192_008) and len(b) == 3


@pytest.mark.parametrize(("k", "n"), [(1, 2), (2, 4), (4, 4), (2, 8)])
def test_mixed_mode_byte_share_matches_paper(k: int, n: int) -> None:
    smap = ServerMap(num_servers=k + n, mode="mixed", cpu_servers=k, num_workers=n)
    parts = [(part_key(d, p), 4_096_000) for d in range(60) for p in range(40)]
    shares = smap.byte_shares(parts)
    want = mixed_ratio(k, n)
    # djb2 % 101 quantises the ratio to 1/101 (BytePS's bound); 2,400 parts give ~1 % noise
    assert abs(sum(shares[:k]) - want) < 0.04
    # the same split as the BytePS model's assignment (paper Eq. 1: k * M_SSCPU / M)
    model = byteps_assignment(gpu_machines=n, cpu_machines=k, model_bytes=1.0)
    assert abs(k * model.ss_cpu_bytes - want) < 1e-9


def test_unknown_hash_mode_is_an_input_error() -> None:
    with pytest.raises(InputError, match="hash"):
        ServerMap(num_servers=2, mode="nope")


def test_summation_threads_are_byte_balanced() -> None:
    srv = Server(num_workers=1, threads=2)
    try:
        from commsched.runtime.ps import frame
        from commsched.runtime.ps.frame import Kind

        for key, nbytes in enumerate([1000, 10, 10, 10, 500]):
            srv._thread_of(frame.decode(frame.encode(Kind.INIT, key=key, offset=nbytes)))
        assert sorted(srv.thread_bytes) == [530, 1000]  # each new key to the least-loaded thread
    finally:
        srv.stop()


def test_push_before_complete_pull_is_deferred_and_reset_each_round() -> None:
    got: list[tuple[int, bytes]] = []
    s = Summation(num_workers=2, reply=lambda w, k, o, d, data: got.append((w, data)))
    s.declare(key=5, nbytes=8, dtype=0)
    for it in range(2):
        s.push(worker=0, key=5, offset=0, payload=np.array([1, 2], np.float32).tobytes())
        s.pull(worker=0, key=5)
        assert len(got) == 2 * it  # deferred
        s.push(worker=1, key=5, offset=0, payload=np.array([it, it], np.float32).tobytes())
        s.pull(worker=1, key=5)
        assert [np.frombuffer(d, np.float32).tolist() for _, d in got[-2:]] == [[1 + it, 2 + it]] * 2


def test_roles_from_dmlc_and_torchrun() -> None:
    env = {"DMLC_ROLE": "server", "DMLC_PS_ROOT_URI": "10.0.0.1", "DMLC_PS_ROOT_PORT": "9000",
           "DMLC_NUM_WORKER": "4", "DMLC_NUM_SERVER": "2", "COMMSCHED_PS_TRANSPORT": "mercury"}  # fmt: skip
    r = role_from_env(env)
    assert (r.role, r.root, r.num_workers, r.num_servers, r.transport.name) == (
        "server", ("10.0.0.1", 9000), 4, 2, "mercury")  # fmt: skip
    t = role_from_env(
        {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "7"}
    )
    assert (t.role, t.rank, t.local_rank, t.root, t.colocated) == ("worker", 3, 1, ("h", 8), True)
    with pytest.raises(InputError, match="DMLC_NUM_WORKER"):
        role_from_env({"DMLC_ROLE": "worker", "DMLC_PS_ROOT_URI": "h", "DMLC_PS_ROOT_PORT": "1"})
    with pytest.raises(InputError, match="no role"):
        role_from_env({})


def test_any_start_order_worker_before_scheduler() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(worker_assignment(("127.0.0.1", port), rank=None,
                                                                           timeout_s=10)))  # fmt: skip
    t.start()
    time.sleep(0.3)  # the worker is already retrying when the scheduler appears
    listener = socket.create_server(("127.0.0.1", port))
    s = threading.Thread(target=serve_scheduler, args=(listener,),
                         kwargs={"num_servers": 1, "num_workers": 1, "timeout_s": 10})  # fmt: skip
    s.start()
    register(("127.0.0.1", port), {"role": "server", "host": "127.0.0.1", "port": 1234}, timeout_s=10)
    t.join(10)
    s.join(10)
    listener.close()
    assert result and result[0].servers == (("127.0.0.1", 1234),) and result[0].rank == 0  # type: ignore[attr-defined]


def test_missing_role_times_out_with_a_clear_error() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    errors: list[BaseException] = []

    def sched() -> None:
        try:
            serve_scheduler(listener, num_servers=1, num_workers=1, timeout_s=1.0)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=sched)
    t.start()
    t0 = time.monotonic()
    with pytest.raises(PSTimeoutError, match="0/1 servers"):
        worker_assignment(("127.0.0.1", port), rank=0, timeout_s=5)
    assert time.monotonic() - t0 < 4
    t.join(5)
    listener.close()
    assert errors and "0/1 servers" in str(errors[0])


def test_no_scheduler_times_out() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with pytest.raises(PSTimeoutError, match="did not answer within"):
        worker_assignment(("127.0.0.1", port), rank=0, timeout_s=0.5)
