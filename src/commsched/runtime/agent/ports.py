"""What a host agent answers a job: the source port and mark of one connection (pure, no I/O).

The source port that pins a connection onto its planned path comes, in this order, from

1. the probe table (``--ports FILE``): what a prober measured on the real fabric, keyed by
   ``(source IP, destination IP, path as a tuple of link ids)``;
2. the decision's own ``src_port``, computed by the daemon from commsched's ECMP hash model
   (:func:`commsched.topology.ecmp.port_for_path`, as ``commsched plan`` does).

The mark (DSCP and TOS byte) is the one of the job's class in the decision
(:func:`commsched.runtime.protocol.marks.mark_for_class`). The answer is a
:class:`~commsched.runtime.protocol.control.PortAnswer`.

Probe-table file: a JSON list of ``{"src_ip": "10.0.0.1", "dst_ip": "10.0.1.1", "path": [3, 17, 42],
"sport": 49153}`` (``src_port`` is accepted for ``sport``), or an object holding that list under
``"entries"`` (as ``commsched testbed probe --json`` may print it, alongside other keys).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from commsched.errors import InputError
from commsched.runtime.protocol.control import HostView, PortAnswer

__all__ = ["ProbeTable", "answer", "load_probe_table"]

PathKey = tuple[str, str, tuple[int, ...]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeTable:
    """Measured ``(src ip, dst ip, links) -> source port``."""

    ports: Mapping[PathKey, int] = field(default_factory=dict)
    #: entries probed for one destination port (the hash includes it): ``(src, dst, links, dport)``
    by_dport: Mapping[tuple[str, str, tuple[int, ...], int], int] = field(default_factory=dict)

    def lookup(
        self, src_ip: str | None, dst_ip: str | None, links: tuple[int, ...], dport: int | None = None
    ) -> int | None:
        if src_ip is None or dst_ip is None:
            return None
        if dport is not None and (src_ip, dst_ip, links, dport) in self.by_dport:
            return self.by_dport[(src_ip, dst_ip, links, dport)]
        return self.ports.get((src_ip, dst_ip, links))

    def __len__(self) -> int:
        return len(self.ports) + len(self.by_dport)


def _entry(row: Any, where: str) -> tuple[PathKey, int]:
    if not isinstance(row, dict):
        raise InputError(
            "entry is not an object", where=where, expected='{"src_ip", "dst_ip", "path", "sport"}'
        )
    sport = row.get("sport", row.get("src_port"))
    path = row.get("path")
    src, dst = row.get("src_ip"), row.get("dst_ip")
    if not isinstance(src, str) or not isinstance(dst, str):
        raise InputError("src_ip and dst_ip must be strings", where=where, expected="IP addresses")
    if not isinstance(path, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in path):
        raise InputError("path must be a list of link ids", where=f"{where}.path", expected="[int, ...]")
    if not isinstance(sport, int) or isinstance(sport, bool) or not 0 < sport < 65536:
        raise InputError(
            f"bad source port {sport!r}", where=f"{where}.sport", expected="an integer in 1..65535"
        )
    return (src, dst, tuple(path)), sport


def parse_probe_table(data: Any, *, source: str = "ports") -> ProbeTable:
    """A probe table from parsed JSON (see the module docstring for the layout)."""
    rows = data.get("entries") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise InputError("no list of entries", where=source, expected='a JSON list, or {"entries": [...]}')
    ports: dict[PathKey, int] = {}
    by_dport: dict[tuple[str, str, tuple[int, ...], int], int] = {}
    for i, row in enumerate(rows):
        key, sport = _entry(row, f"{source}: entries[{i}]")
        dport = row.get("dport")
        if dport is None:
            ports[key] = sport
        elif isinstance(dport, int) and not isinstance(dport, bool) and 0 < dport < 65536:
            by_dport[(*key, dport)] = sport
        else:
            raise InputError(
                f"bad destination port {dport!r}", where=f"{source}: entries[{i}].dport", expected="1..65535"
            )
    return ProbeTable(ports=ports, by_dport=by_dport)


def load_probe_table(path: Path) -> ProbeTable:
    """Read a probe-table JSON file; errors name the file and the entry."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", where=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", where=f"{path}:{exc.lineno}") from None
    return parse_probe_table(data, source=str(path))


def answer(
    view: HostView | Mapping[str, Any],
    table: ProbeTable | None,
    job: str,
    src_rank: int,
    dst_rank: int,
    *,
    dport: int | None = None,
) -> PortAnswer | None:
    """Source port and mark for connection ``(job, src_rank, dst_rank)`` under the host view ``view``.

    ``view``: the :class:`~commsched.runtime.protocol.control.HostView` (or its JSON, validated here);
    ``dport``: the destination port the connection goes to; entries probed for it come first.
    Returns ``None`` when the decision has no such job. Connections the decision does not route
    (same host, or not in the job's collective) get the job's mark and ``src_port`` ``None`` (any port).

    Examples
    --------
    >>> view = {"format": 1, "version": 3, "policy": "crux-full", "host": "h0",
    ...     "jobs": {"a": {"rank": 0, "class": 1, "dscp": 40, "tos": 160, "gpus": ["h0/gpu0", "h1/gpu0"],
    ...                    "hosts": ["h0", "h1"], "compute_s": 0.1, "comm_bytes": 1e6}},
    ...     "connections": [{"job": "a", "src_rank": 0, "dst_rank": 1, "src": "h0/gpu0", "dst": "h1/gpu0",
    ...      "src_nic": "h0/nic0", "dst_nic": "h1/nic0", "path_index": 0, "n_paths": 1,
    ...      "path": ["h0/nic0", "tor0", "h1/nic0"], "links": [4, 9], "src_port": 49200}],
    ...     "nic_ips": {"h0/nic0": "10.0.0.1", "h1/nic0": "10.0.0.2"}}
    >>> out = answer(view, None, "a", 0, 1)
    >>> out.src_port, out.source, out.mark.tos
    (49200, 'hash-model', 160)
    >>> t = ProbeTable(ports={("10.0.0.1", "10.0.0.2", (4, 9)): 50001})
    >>> answer(view, t, "a", 0, 1).src_port, answer(view, t, "a", 1, 0).src_port
    (50001, None)
    """
    host = view if isinstance(view, HostView) else HostView.from_json(view)
    info = host.jobs.get(job)
    if info is None:
        return None
    base = PortAnswer(
        version=host.version,
        job=job,
        src_rank=src_rank,
        dst_rank=dst_rank,
        priority_class=info.priority_class,
        mark=info.mark,
    )
    for c in host.connections:
        if c.job == job and c.src_rank == src_rank and c.dst_rank == dst_rank:
            ips = host.nic_ips
            probed = table.lookup(ips.get(c.src_nic), ips.get(c.dst_nic), c.links, dport) if table else None
            return replace(
                base,
                src_port=probed if probed is not None else c.src_port,
                source="probe" if probed is not None else "hash-model",
                path=c.path,
                links=c.links,
            )
    return base
