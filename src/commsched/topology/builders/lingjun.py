"""Loader of the Alibaba Lingjun 2023 ``topo.csv`` (columns ``ip,DSW,PSW,ASW``) into a three-layer Clos.

Each row is one host; ``ip`` is a hash of the host IP (kept as :attr:`Host.label`, so worker records can
be joined with :meth:`Topology.host_by_label`). ``ASW`` labels are only unique within a ``PSW``, so a ToR
is keyed by ``(PSW, ASW)`` (node id ``tor_{PSW}_{ASW}``); ``PSW`` is the aggregation (pod) layer
(``agg_{PSW}``), ``DSW`` the core group (``core_{DSW}``). The file has no link speeds or NIC counts:
they are parameters.

References
----------
Crux (SIGCOMM'24) §6.5; reference/crux-spec.md §9.1 and §9.4; data/alibaba-lingjun-2023/README.md.
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from commsched.errors import InputError
from commsched.topology import checks
from commsched.topology.assembly import Assembler, CableSpec
from commsched.topology.builders.clos import DEFAULT_LATENCY_S
from commsched.topology.graph import Topology
from commsched.topology.hosts import NIC_200G_BPS, HostTemplate, rail_host, resolve_template
from commsched.topology.records import NodeId, NodeKind

COLUMNS = ("ip", "DSW", "PSW", "ASW")


@dataclass(frozen=True, slots=True, kw_only=True)
class LingjunRow:
    """One host of ``topo.csv``."""

    ip: str
    dsw: str
    psw: str
    asw: str
    line: int


def read_lingjun_rows(path: str | Path) -> list[LingjunRow]:
    """Parse and check ``topo.csv``; errors name ``file:line`` and the expected columns."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read Lingjun topology: {exc}", where=str(p)) from None
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if header is None or tuple(c.strip() for c in header) != COLUMNS:
        raise InputError(f"bad header {header!r}", where=f"{p}:1", expected="columns " + ",".join(COLUMNS))
    rows: list[LingjunRow] = []
    seen: dict[str, int] = {}
    for line, rec in enumerate(reader, start=2):
        if not rec:
            continue
        vals = [v.strip() for v in rec]
        if len(vals) != len(COLUMNS) or not all(vals):
            raise InputError(
                f"bad row {rec!r}", where=f"{p}:{line}", expected="4 non-empty fields " + ",".join(COLUMNS)
            )
        if vals[0] in seen:
            raise InputError(
                f"duplicate ip (first on line {seen[vals[0]]})",
                where=f"{p}:{line}",
                expected="one row per host",
            )
        seen[vals[0]] = line
        rows.append(LingjunRow(ip=vals[0], dsw=vals[1], psw=vals[2], asw=vals[3], line=line))
    if not rows:
        raise InputError("no hosts", where=str(p), expected="at least one row after the header")
    _check_tree(rows, p)
    return rows


def _check_tree(rows: list[LingjunRow], p: Path) -> None:
    """Every PSW must hang off one DSW (a tree), or the layers are ambiguous."""
    dsw_of: dict[str, LingjunRow] = {}
    for r in rows:
        first = dsw_of.setdefault(r.psw, r)
        if first.dsw != r.dsw:
            raise InputError(
                f"PSW {r.psw} under DSW {r.dsw}, but under {first.dsw} on line {first.line}",
                where=f"{p}:{r.line}",
                expected="one DSW per PSW",
            )


def _template(host_template: str | HostTemplate | None, gpus: int) -> HostTemplate:
    tmpl = rail_host(gpus) if host_template is None else resolve_template(host_template)
    if tmpl.n_gpus != gpus:
        raise InputError(
            f"template {tmpl.name} has {tmpl.n_gpus} GPUs",
            where="topology.host_template",
            expected=f"gpus_per_host={gpus}",
        )
    return tmpl


def _switch_layers(
    asm: Assembler, rows: list[LingjunRow], aggs_per_psw: int, cores_per_dsw: int
) -> dict[str, list[NodeId]]:
    """Create ToRs, Aggs and Cores in first-appearance order; map ToR/PSW/DSW keys to their switches."""
    ids: dict[str, list[NodeId]] = {}
    layers: tuple[tuple[NodeKind, int, list[str]], ...] = (
        (NodeKind.TOR, 1, [f"tor_{r.psw}_{r.asw}" for r in rows]),
        (NodeKind.AGG, aggs_per_psw, [f"agg_{r.psw}" for r in rows]),
        (NodeKind.CORE, cores_per_dsw, [f"core_{r.dsw}" for r in rows]),
    )
    for kind, reps, keys in layers:
        for key in keys:
            if key not in ids:
                names = [key] if reps == 1 else [f"{key}_{i}" for i in range(reps)]
                ids[key] = [asm.node(n, kind) for n in names]
    return ids


def load_lingjun_topo(
    path: str | Path,
    *,
    gpus_per_host: int = 8,
    host_template: str | HostTemplate | None = None,
    host_link_bps: float = NIC_200G_BPS,
    tor_agg_bps: float | None = None,
    agg_core_bps: float | None = None,
    aggs_per_psw: int = 1,
    cores_per_dsw: int = 1,
    latency_s: float = DEFAULT_LATENCY_S,
) -> Topology:
    """Build the Lingjun cluster from ``topo.csv``: host -> ToR (PSW, ASW) -> Agg (PSW) -> Core (DSW).

    Parameters
    ----------
    path
        The CSV file (header ``ip,DSW,PSW,ASW``).
    gpus_per_host, host_template
        Hosts are ``rail_host(gpus_per_host)`` (one 200 Gb/s NIC per GPU) unless a template is given;
        all NICs of a host are cabled to its ToR.
    host_link_bps, tor_agg_bps, agg_core_bps
        Cable speeds in bits/s (not in the file). Host links default to 200 Gb/s; the fabric defaults to
        non-blocking: a ToR-Agg cable carries the ToR's host-facing capacity divided by
        ``aggs_per_psw``, an Agg-Core cable the Agg's ToR-facing capacity divided by ``cores_per_dsw``
        (so a cable stands for a bundle, and its speed varies with the hosts under the ToR).
    aggs_per_psw, cores_per_dsw
        Expand each PSW / DSW label into that many switches (``agg_P10_0`` ...), every ToR cabled to every
        Agg of its PSW and every Agg to every Core of its DSW, for multipath studies. Default 1: the file
        as is (one path between any two NICs).
    latency_s
        Latency of every network link, seconds.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "topo.csv"
    >>> _ = f.write_text("ip,DSW,PSW,ASW\\nx1,G6,P8,S1\\nx2,G6,P10,S1\\n")
    >>> topo = load_lingjun_topo(f)
    >>> topo.host_by_label("x2").tors, len(topo.equal_cost_paths("h0/nic0", "h1/nic0")[0].links)
    (('tor_P10_S1',), 6)
    """
    rows = read_lingjun_rows(path)
    gpus = checks.count("gpus_per_host", gpus_per_host)
    tmpl = _template(host_template, gpus)
    n_agg, n_core = checks.count("aggs_per_psw", aggs_per_psw), checks.count("cores_per_dsw", cores_per_dsw)
    lat = checks.seconds("latency_s", latency_s)
    down = CableSpec(capacity_bps=checks.rate("host_link_bps", host_link_bps), latency_s=lat)
    t2a_bps = None if tor_agg_bps is None else checks.rate("tor_agg_bps", tor_agg_bps)
    a2c_bps = None if agg_core_bps is None else checks.rate("agg_core_bps", agg_core_bps)
    asm = Assembler(f"lingjun_{Path(path).stem}")
    ids = _switch_layers(asm, rows, n_agg, n_core)
    for h, r in enumerate(rows):
        asm.host(tmpl, h, [ids[f"tor_{r.psw}_{r.asw}"]] * tmpl.n_nics, down, label=r.ip)
    tor_hosts = Counter((r.psw, r.asw) for r in rows)
    psw_up: dict[str, float] = {}  # ToR-facing capacity of each Agg of a PSW, bits/s
    for (psw, asw), n in tor_hosts.items():
        bps = t2a_bps or n * tmpl.n_nics * down.capacity_bps / n_agg
        psw_up[psw] = psw_up.get(psw, 0.0) + bps
        asm.mesh(ids[f"tor_{psw}_{asw}"], ids[f"agg_{psw}"], 1, CableSpec(capacity_bps=bps, latency_s=lat))
    for psw, dsw in {r.psw: r.dsw for r in rows}.items():
        bps = a2c_bps or psw_up[psw] / n_core
        asm.mesh(ids[f"agg_{psw}"], ids[f"core_{dsw}"], 1, CableSpec(capacity_bps=bps, latency_s=lat))
    return asm.finish(
        {
            "kind": "lingjun",
            "path": str(path),
            "gpus_per_host": gpus,
            "host_template": tmpl.name,
            "host_link_bps": down.capacity_bps,
            "tor_agg_bps": t2a_bps,
            "agg_core_bps": a2c_bps,
            "aggs_per_psw": n_agg,
            "cores_per_dsw": n_core,
            "latency_s": lat,
        }
    )
