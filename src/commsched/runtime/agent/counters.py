"""Link counters an agent can report: a pluggable source (``read() -> {name: value}``).

:class:`NullCounters` reports nothing (a host that is not on a testbed); :class:`ProcNetDevCounters`
reads the byte and packet counters of network interfaces from ``/proc/net/dev`` (Linux), named
``IFACE.rx_bytes``, ``IFACE.tx_bytes``, ``IFACE.rx_packets``, ``IFACE.tx_packets``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

__all__ = ["CounterSource", "NullCounters", "ProcNetDevCounters", "counter_source"]


class CounterSource(Protocol):
    """Anything that reads counters now."""

    def read(self) -> dict[str, float]: ...


class NullCounters:
    """No counters (the default off a testbed)."""

    def read(self) -> dict[str, float]:
        return {}


class ProcNetDevCounters:
    """Interface counters from ``/proc/net/dev`` (all interfaces, or only ``interfaces``)."""

    def __init__(self, interfaces: Sequence[str] = (), *, path: Path = Path("/proc/net/dev")) -> None:
        self.interfaces = frozenset(interfaces)
        self.path = path

    def read(self) -> dict[str, float]:
        out: dict[str, float] = {}
        try:
            lines = self.path.read_text().splitlines()[2:]
        except OSError:
            return out
        for line in lines:
            name, _, rest = line.partition(":")
            name = name.strip()
            if self.interfaces and name not in self.interfaces:
                continue
            f = rest.split()
            if len(f) < 10:
                continue
            out[f"{name}.rx_bytes"] = float(f[0])
            out[f"{name}.rx_packets"] = float(f[1])
            out[f"{name}.tx_bytes"] = float(f[8])
            out[f"{name}.tx_packets"] = float(f[9])
        return out


def counter_source(name: str) -> CounterSource:
    """``none`` or ``netdev`` (all interfaces) or ``netdev:IF1,IF2``."""
    from commsched.errors import InputError

    if name == "none":
        return NullCounters()
    if name == "netdev" or name.startswith("netdev:"):
        ifs = [x for x in name.partition(":")[2].split(",") if x]
        return ProcNetDevCounters(ifs)
    raise InputError(
        f"unknown counter source {name!r}", where="--counters", expected="none, netdev or netdev:IF,..."
    )
