"""The PS runtime marks both ends of every connection with its class's DSCP (IPv4 and IPv6).

The byte read back with ``getsockopt`` must be the TOS / traffic-class byte ``dscp << 2`` (class 0:
DSCP 46, byte 184), on the worker's socket and on the server's accepted socket: a DSCP written where
the byte belongs (46 instead of 184) fails here.
"""

from __future__ import annotations

import socket
import time

import pytest

from commsched.errors import InputError
from commsched.runtime.protocol.marks import Mark, mark_for_class, socket_mark
from commsched.runtime.ps.client import PSClient
from commsched.runtime.ps.roles import mark_from_env, transport_from_env
from commsched.runtime.ps.server import Server


def _ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


def _raw(sock: socket.socket) -> int:
    if sock.family == socket.AF_INET6:
        return int(sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS))
    return int(sock.getsockopt(socket.IPPROTO_IP, socket.IP_TOS))


FAMILIES = [
    pytest.param("127.0.0.1", id="ipv4"),
    pytest.param(
        "::1",
        id="ipv6",
        marks=pytest.mark.skipif(not _ipv6_loopback(), reason="this kernel has no IPv6 loopback (::1)"),
    ),
]


@pytest.mark.parametrize("host", FAMILIES)
@pytest.mark.parametrize(
    ("env", "byte"),
    [
        ({"COMMSCHED_PS_CLASS": "0"}, 184),
        ({"COMMSCHED_PS_CLASS": "2"}, 136),
        ({"COMMSCHED_PS_DSCP": "40"}, 160),
    ],
)
def test_both_ends_of_a_connection_carry_the_class_byte(host: str, env: dict[str, str], byte: int) -> None:
    transport = transport_from_env(env)
    assert transport.tos == byte
    server = Server(num_workers=1, host=host, mark=transport.mark).start()
    try:
        assert _raw(server._listener) == byte
        with PSClient(
            servers=[server.address], rank=0, num_workers=1, transport=transport, timeout_s=10
        ) as c:
            client_sock = c._socks[0]
            deadline = time.monotonic() + 10
            while 0 not in server._conns and time.monotonic() < deadline:
                time.sleep(0.01)
            server_sock = server._conns[0].sock
            assert (
                client_sock.family
                == server_sock.family
                == (socket.AF_INET6 if ":" in host else socket.AF_INET)
            )
            assert (_raw(client_sock), _raw(server_sock)) == (byte, byte)
            assert socket_mark(client_sock) == socket_mark(server_sock) == Mark(dscp=byte >> 2)
    finally:
        server.stop()


def test_an_unmarked_job_leaves_the_byte_alone() -> None:
    transport = transport_from_env({})
    assert transport.mark is None and transport.tos is None
    server = Server(num_workers=1).start()
    try:
        with PSClient(
            servers=[server.address], rank=0, num_workers=1, transport=transport, timeout_s=10
        ) as c:
            assert _raw(c._socks[0]) == 0
    finally:
        server.stop()


def test_the_mark_comes_from_the_one_class_function() -> None:
    for cls in range(8):
        assert mark_from_env({"COMMSCHED_PS_CLASS": str(cls)}) == mark_for_class(cls)
        assert mark_for_class(cls).tos == mark_for_class(cls).dscp * 4
    assert [mark_for_class(c).tos for c in (0, 1, 7)] == [184, 160, 0]


@pytest.mark.parametrize(
    ("env", "where"),
    [
        ({"COMMSCHED_PS_CLASS": "1", "COMMSCHED_PS_DSCP": "46"}, "COMMSCHED_PS_CLASS and COMMSCHED_PS_DSCP"),
        ({"COMMSCHED_PS_DSCP": "64"}, "dscp"),
        ({"COMMSCHED_PS_DSCP": "x"}, "COMMSCHED_PS_DSCP"),
        ({"COMMSCHED_PS_CLASS": "-1"}, "class"),
    ],
)
def test_a_bad_mark_is_refused_with_its_variable(env: dict[str, str], where: str) -> None:
    with pytest.raises(InputError) as err:
        mark_from_env(env)
    assert err.value.where == where


def test_the_older_tos_spelling_of_the_server_is_the_same_mark() -> None:
    server = Server(num_workers=1, tos=184)
    try:
        assert _raw(server._listener) == 184
    finally:
        server.stop()
