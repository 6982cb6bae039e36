"""A host's TCP sockets and tracked connections, read from ``/proc`` (parsers pure, readers thin).

* ``/proc/net/tcp``: every IPv4 TCP socket of the network namespace (state, addresses, inode);
  the agent finds a job's connections waiting on a held SYN (``SYN_SENT``) and its listeners here.
* ``/proc/net/nf_conntrack``: every tracked connection with its original and reply tuple, its mark
  and, with ``net.netfilter.nf_conntrack_acct=1``, its bytes: the reply tuple of a translated
  connection holds the source port the wire sees.
* ``/proc/PID/fd``: which sockets (inodes) belong to which process.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "LISTEN",
    "SYN_SENT",
    "Socket",
    "Tracked",
    "parse_conntrack",
    "parse_proc_tcp",
    "read_conntrack",
    "read_sockets",
    "socket_inodes",
]

SYN_SENT = 0x02
LISTEN = 0x0A


@dataclass(frozen=True, slots=True, kw_only=True)
class Socket:
    """One line of ``/proc/net/tcp``."""

    local: tuple[str, int]
    remote: tuple[str, int]
    state: int
    inode: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Tracked:
    """One TCP entry of ``/proc/net/nf_conntrack``: original and reply 4-tuples, mark, bytes."""

    orig: tuple[str, int, str, int]  # src, sport, dst, dport as the socket sees them
    reply: tuple[str, int, str, int]  # as the reply comes back (a translated source port is reply[3])
    state: str
    mark: int
    orig_bytes: int | None = None
    reply_bytes: int | None = None

    @property
    def wire_sport(self) -> int:
        """The source port the network sees for the original direction (translated or not)."""
        return self.reply[3]


def _addr(field: str) -> tuple[str, int]:
    ip_hex, _, port_hex = field.partition(":")
    ip = socket.inet_ntoa(struct.pack("<I", int(ip_hex, 16)))
    return ip, int(port_hex, 16)


def parse_proc_tcp(text: str) -> list[Socket]:
    """Sockets of a ``/proc/net/tcp`` text.

    Examples
    --------
    >>> text = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
    ...         "timeout inode\\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 "
    ...         "00000000     0        0 4242 1\\n")
    >>> parse_proc_tcp(text)[0]
    Socket(local=('127.0.0.1', 8080), remote=('0.0.0.0', 0), state=10, inode=4242)
    """
    out = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 10:
            continue
        out.append(Socket(local=_addr(f[1]), remote=_addr(f[2]), state=int(f[3], 16), inode=int(f[9])))
    return out


def parse_conntrack(text: str) -> list[Tracked]:
    """TCP entries of a ``/proc/net/nf_conntrack`` text.

    Examples
    --------
    >>> line = ("ipv4 2 tcp 6 431999 ESTABLISHED src=10.0.0.1 dst=10.0.1.1 sport=40000 dport=5000 "
    ...         "src=10.0.1.1 dst=10.0.0.1 sport=5000 dport=20017 [ASSURED] mark=1129512961 use=2")
    >>> t = parse_conntrack(line)[0]
    >>> t.orig, t.wire_sport, hex(t.mark)
    (('10.0.0.1', 40000, '10.0.1.1', 5000), 20017, '0x43530001')
    """
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) < 6 or f[0] != "ipv4" or f[2] != "tcp":
            continue
        tuples: list[dict[str, str]] = [{}, {}]
        side, mark = 0, 0
        for item in f[5:]:
            key, sep, value = item.partition("=")
            if not sep:
                continue
            if key == "mark":
                mark = int(value)
            elif key in ("src", "dst", "sport", "dport", "bytes"):
                if key in tuples[side] and side == 0:
                    side = 1
                tuples[side][key] = value
        o, r = tuples
        if not all(k in o and k in r for k in ("src", "dst", "sport", "dport")):
            continue
        out.append(
            Tracked(
                orig=(o["src"], int(o["sport"]), o["dst"], int(o["dport"])),
                reply=(r["src"], int(r["sport"]), r["dst"], int(r["dport"])),
                state=f[5],
                mark=mark,
                orig_bytes=int(o["bytes"]) if "bytes" in o else None,
                reply_bytes=int(r["bytes"]) if "bytes" in r else None,
            )
        )
    return out


def read_sockets(path: Path = Path("/proc/net/tcp")) -> list[Socket]:
    """The IPv4 TCP sockets of the calling thread's network namespace."""
    try:
        return parse_proc_tcp(path.read_text())
    except OSError:
        return []


def read_conntrack(path: Path = Path("/proc/net/nf_conntrack")) -> list[Tracked]:
    """The tracked TCP connections of the calling thread's network namespace (empty if unreadable)."""
    try:
        return parse_conntrack(path.read_text())
    except OSError:
        return []


def socket_inodes(pids: Iterable[int], proc: Path = Path("/proc")) -> set[int]:
    """Inodes of every socket the processes ``pids`` hold open."""
    out: set[int] = set()
    for pid in pids:
        fd_dir = proc / str(pid) / "fd"
        try:
            fds = list(fd_dir.iterdir())
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                target = str(fd.readlink())
                if target.startswith("socket:["):
                    out.add(int(target[8:-1]))
    return out
