"""What a run sets on its testbed: tuned for real jobs, rewired, loopback shaped, paths probed.

:func:`tune` sets what real jobs need (:mod:`commsched.testbed.tuning`); per policy,
:func:`set_circuits` rewires the OCS circuits a placement asks for, :func:`shape_intra_host` shapes the
hops of flat rings that cross a host's loopback and :func:`probe_table` writes the agents' table of a
source port per path. :class:`.launcher.Launcher` calls them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import NotRequired, TypedDict

from commsched.runtime.launch.jobs import JobLayout
from commsched.runtime.launch.settings import RunOptions
from commsched.testbed.handle import Testbed

__all__ = [
    "Circuits",
    "HopJSON",
    "IntraHostJSON",
    "ProbedJSON",
    "probe_table",
    "set_circuits",
    "shape_intra_host",
    "tune",
]


class HopJSON(TypedDict):
    """An intra-host hop of a flat ring, at its link's scaled rate (bits/s); ``why`` it is not shaped."""

    job: str
    src: str  # GPU
    dst: str
    rate_bps: float
    why: NotRequired[str]


class IntraHostJSON(TypedDict):
    """:func:`shape_intra_host`: the hops shaped, those not, the intra-host links at their rate (bit/s)."""

    shaped: list[HopJSON]
    unshaped: list[HopJSON]
    links: dict[int, float]


class ProbeEntryJSON(TypedDict):
    """An entry of the agents' probe table (:mod:`commsched.runtime.agent.ports`)."""

    src_ip: str
    dst_ip: str
    path: list[int]
    sport: int
    dport: int


class ProbedJSON(TypedDict):
    """:func:`probe_table`'s counts: destination ports probed, paths found of all the paths asked."""

    ports: int
    paths_found: int
    paths: int


Circuits = tuple[tuple[int, ...], ...]


def tune(tb: Testbed, opts: RunOptions) -> dict[str, int]:
    """Deeper class queues (``opts.queue_bytes``), steady TCP, smaller packets (``opts.segment_bytes``)
    and, with them, HTB bursts of one such packet (a switch port has no token bucket to spend).

    Returns what the report says of it: ``queues_changed``, ``segmented_nics`` and ``burst_bytes``
    (where done).
    """
    from commsched.testbed.tuning import (
        deepen_queues,
        segment_packets,
        steady_tcp,
        tight_burst_bytes,
        tighten_bursts,
    )

    out: dict[str, int] = {}
    if opts.queue_bytes:
        out["queues_changed"] = deepen_queues(tb, opts.queue_bytes)
    steady_tcp(tb)
    if opts.segment_bytes:
        out["segmented_nics"] = segment_packets(tb, opts.segment_bytes)
        out["burst_bytes"] = tight_burst_bytes(opts.segment_bytes)
        tighten_bursts(tb, out["burst_bytes"])
    return out


def shape_intra_host(tb: Testbed, jobs: Sequence[JobLayout]) -> IntraHostJSON:
    """Shape every intra-host hop of the flat rings of ``jobs`` to its link's scaled rate, on ``lo``.

    A hop ``GPU a -> GPU b`` of one host is held to ``min capacity of the intra-host path x rate
    scale`` (bit/s), unless that is above :data:`commsched.testbed.tuning.LOOPBACK_MAX_BPS`. Returns
    ``{"shaped": [...], "unshaped": [...], "links": {link: bps}}`` (``links``: the intra-host links at
    the rate they were shaped to, for the twin).
    """
    from commsched.testbed.htb import LoopbackHop
    from commsched.testbed.tuning import LOOPBACK_MAX_BPS, shape_loopback

    out: IntraHostJSON = {"shaped": [], "unshaped": [], "links": {}}
    hops: dict[str, list[LoopbackHop]] = defaultdict(list)
    topo = tb.topology
    for job in (j for j in jobs if j.flat):
        for a, b in job.ring():
            if a.host_index != b.host_index:
                continue
            path = topo.intra_host_path(a.gpu, b.gpu)
            rate = float(min(topo.capacity_bps[list(path.links)])) * tb.rate_scale  # bits/s
            hop: HopJSON = {"job": job.id, "src": str(a.gpu), "dst": str(b.gpu), "rate_bps": rate}
            if rate > LOOPBACK_MAX_BPS:
                out["unshaped"].append({**hop, "why": f"above {LOOPBACK_MAX_BPS:.0e} bit/s"})
                continue
            hops[job.hosts[a.host_index]].append(LoopbackHop(dst_ip=b.ip, dport=b.port, rate_bps=rate))
            out["shaped"].append(hop)
            out["links"].update({int(lk): rate for lk in path.links})
    shape_loopback(tb, hops)
    return out


def probe_table(tb: Testbed, jobs: Sequence[JobLayout], path: Path) -> ProbedJSON:
    """Probe every connection's NIC pair for its destination port; write the agents' table to ``path``.

    Returns ``{"ports": ..., "paths_found": ..., "paths": ...}`` for the report.
    """
    from commsched.testbed.probe import probe

    pairs: dict[int, dict[tuple[str, str], None]] = defaultdict(dict)
    for job in jobs:
        for src, dst in job.ring():
            if src.nic != dst.nic and tb.topology.host_of(src.gpu).id != tb.topology.host_of(dst.gpu).id:
                pairs[dst.port][(str(src.nic), str(dst.nic))] = None
    entries: list[ProbeEntryJSON] = []
    found = total = 0
    for dport, chosen in sorted(pairs.items()):
        res = probe(tb.topology, tb.layout, list(chosen), dport=dport)  # type: ignore[arg-type]
        for pp in res.pairs:
            total += len(pp.ports) + len(pp.missing)
            found += len(pp.ports)
            for links, sport in pp.ports.items():
                entries.append(
                    {
                        "src_ip": tb.nic_address(pp.src),
                        "dst_ip": tb.nic_address(pp.dst),
                        "path": [int(x) for x in links],
                        "sport": int(sport),
                        "dport": dport,
                    }
                )
    path.write_text(json.dumps({"entries": entries}))
    return {"ports": len(pairs), "paths_found": found, "paths": total}


def set_circuits(tb: Testbed, wanted: Circuits | None, *, static: Circuits | None) -> Testbed:
    """Set the OCS circuits ``wanted`` (``testbed rewire``), or the ``static`` ones back (``None``).

    ``static``: the topology's static circuits (``None``: no OCS layer). Returns the testbed, rebuilt
    from its new state when the circuits changed.
    """
    from commsched.testbed import build
    from commsched.testbed.state import read_state

    raw = read_state(tb.name).topology.get("circuits")
    current = None if raw is None else tuple(tuple(int(x) for x in r) for r in raw)
    if current == static:
        current = None
    if wanted == current:
        return tb
    return Testbed(build.rewire(tb.name, wanted if wanted is not None else static or ()))
