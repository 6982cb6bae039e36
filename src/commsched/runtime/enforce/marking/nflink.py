"""Named nftables counters read over netlink, without a process per read.

The agent samples a job's byte counters every few milliseconds (its traffic series, from which the
iteration period is recovered); spawning ``nft`` for each sample would cost more CPU than the job's
own communication on a small host. :func:`read_counters` asks the kernel directly: one
``NFT_MSG_GETOBJ`` dump of the counter objects of one table (``NETLINK_NETFILTER``), answered in
microseconds. The counters are read in the network namespace of the calling thread.

Message layout (``linux/netfilter/nf_tables.h``, ``linux/netfilter/nfnetlink.h``): a netlink header,
a ``nfgenmsg`` (family, version, resource id), then attributes; nftables attribute values are in
network byte order.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass

from commsched.errors import CapabilityError

__all__ = ["CounterValue", "decode_objects", "dump_request", "read_counters"]

NETLINK_NETFILTER = 12
NFNL_SUBSYS_NFTABLES = 10
NFT_MSG_GETOBJ = 19
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
NFPROTO_INET = 1
NFT_OBJECT_COUNTER = 1
NFTA_OBJ_TABLE, NFTA_OBJ_NAME, NFTA_OBJ_TYPE, NFTA_OBJ_DATA = 1, 2, 3, 4
NFTA_COUNTER_BYTES, NFTA_COUNTER_PACKETS = 1, 2
NLA_TYPE_MASK = 0x3FFF  # strips the nested / byte-order flags

_NLMSG = struct.Struct("=IHHII")  # length, type, flags, sequence, port id (host order)
_NFGEN = struct.Struct("=BBH")  # family, version, resource id (big endian, 0 here)
_NLA = struct.Struct("=HH")


@dataclass(frozen=True, slots=True, kw_only=True)
class CounterValue:
    """One named counter: packets and bytes since it was made."""

    packets: int
    bytes: int


def _attr(kind: int, payload: bytes) -> bytes:
    raw = _NLA.pack(_NLA.size + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def dump_request(table: str, *, seq: int = 1) -> bytes:
    """The netlink message that dumps the counter objects of ``inet`` table ``table``."""
    body = _NFGEN.pack(NFPROTO_INET, 0, 0)
    body += _attr(NFTA_OBJ_TABLE, table.encode() + b"\0")
    body += _attr(NFTA_OBJ_TYPE, struct.pack(">I", NFT_OBJECT_COUNTER))
    kind = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETOBJ
    return _NLMSG.pack(_NLMSG.size + len(body), kind, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


def _attrs(data: bytes) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    pos = 0
    while pos + _NLA.size <= len(data):
        length, kind = _NLA.unpack_from(data, pos)
        if length < _NLA.size:
            break
        out[kind & NLA_TYPE_MASK] = data[pos + _NLA.size : pos + length]
        pos += (length + 3) & ~3
    return out


def decode_objects(buf: bytes) -> tuple[dict[str, CounterValue], bool]:
    """Counters in one receive buffer of a dump, and whether the dump ended (``NLMSG_DONE``).

    Raises :class:`OSError` for a netlink error message (for instance ``ENOENT``: no such table).
    """
    out: dict[str, CounterValue] = {}
    pos, done = 0, False
    while pos + _NLMSG.size <= len(buf):
        length, kind, _flags, _seq, _pid = _NLMSG.unpack_from(buf, pos)
        if length < _NLMSG.size:
            break
        body = buf[pos + _NLMSG.size : pos + length]
        pos += (length + 3) & ~3
        if kind == NLMSG_DONE:
            done = True
            continue
        if kind == NLMSG_ERROR:
            (code,) = struct.unpack_from("=i", body)
            if code:
                raise OSError(-code, os.strerror(-code))
            continue
        attrs = _attrs(body[_NFGEN.size :])
        name, data = attrs.get(NFTA_OBJ_NAME), attrs.get(NFTA_OBJ_DATA)
        if name is None or data is None:
            continue
        inner = _attrs(data)
        out[name.rstrip(b"\0").decode()] = CounterValue(
            packets=struct.unpack(">Q", inner.get(NFTA_COUNTER_PACKETS, b"\0" * 8))[0],
            bytes=struct.unpack(">Q", inner.get(NFTA_COUNTER_BYTES, b"\0" * 8))[0],
        )
    return out, done


class CounterReader:
    """A netlink socket kept open for repeated dumps of one table's counters (one thread at a time)."""

    def __init__(self, table: str) -> None:
        self.table = table
        try:
            self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        except OSError as exc:
            raise CapabilityError(f"no netfilter netlink socket: {exc.strerror}", where="counters") from None
        self._sock.bind((0, 0))
        self._seq = 0

    def read(self) -> dict[str, CounterValue]:
        """Every counter object of the table now (``OSError`` when the table is gone)."""
        self._seq += 1
        self._sock.send(dump_request(self.table, seq=self._seq))
        out: dict[str, CounterValue] = {}
        done = False
        while not done:
            part, done = decode_objects(self._sock.recv(1 << 16))
            out.update(part)
        return out

    def close(self) -> None:
        self._sock.close()


def read_counters(table: str) -> dict[str, CounterValue]:
    """One dump of ``table``'s counters (opens and closes a socket; see :class:`CounterReader`)."""
    reader = CounterReader(table)
    try:
        return reader.read()
    finally:
        reader.close()
