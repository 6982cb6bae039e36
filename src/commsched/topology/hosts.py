"""Host templates: the GPUs, PCIe switches, CPUs, NVSwitch and NICs inside one server, and their links.

A :class:`HostTemplate` is data: named parts and duplex wires between them. Builders stamp it out per
host with node ids ``h{index}/{part}`` (``h3/gpu5``, ``h3/nic1``, ``h3/pcie0``).

Bandwidths (per direction; every link is directed, a duplex wire is two links):

* PCIe Gen4 x16: 16 GT/s per lane x 16 lanes = 256 Gb/s raw (31.5 GB/s after 128b/130b encoding;
  we keep the raw figure, like the BytePS paper does for Gen3). PCI-SIG, PCIe Base Spec 4.0.
* PCIe Gen3 x16: 8 GT/s x 16 = 128 Gb/s, the figure BytePS §4.2.1 quotes.
* A100 NVLink (3rd gen): 600 GB/s per GPU in total over both directions (NVIDIA A100 datasheet), so
  300 GB/s per direction = 2.4 Tb/s per direction (x 8 bits/byte). Modelled as one GPU<->NVSwitch link.
* V100 NVLink (BytePS NVLink machines, §4.2.2: "NVLink mesh giving 1.2 Tb/s"): 6 links x 25 GB/s per
  direction = 150 GB/s = 1.2 Tb/s per direction. The hybrid cube mesh is simplified to a full-bandwidth
  hub (one NVSwitch node), which is what the BytePS strategies assume ("NVLink much wider than PCIe").
* CPU socket interconnect (QPI/UPI): BytePS §4.2.1 says > 300 Gb/s and never the bottleneck; 400 Gb/s.
  It is a link of kind ``PCIE`` (the only non-NVLink intra-host kind).
* NICs: 200 Gb/s for A100 hosts (Crux testbed, 4 x 200 Gb/s), 100 Gb/s for the BytePS V100 hosts.

Intra-host links have zero latency.

References
----------
Crux (SIGCOMM'24) §6.1 / reference/crux-spec.md §6.1 (A100 8 GPU / 4 NIC hosts);
BytePS (OSDI'20) §4.2.1 Fig. 6a (PCIe-only) and §4.2.2 Fig. 8a (NVLink-based);
vClos §3 (one NIC per GPU).
"""

from __future__ import annotations

from dataclasses import dataclass

from commsched.registry import Registry
from commsched.topology.records import LinkKind, NodeKind

PCIE4_X16_BPS = 16e9 * 16  # 16 GT/s/lane x 16 lanes, bits/s (raw; 128b/130b encoding ignored)
PCIE3_X16_BPS = 8e9 * 16  # 8 GT/s/lane x 16 lanes = 128 Gb/s, bits/s (BytePS §4.2.1)
A100_NVLINK_BPS = 300e9 * 8  # 300 GB/s per direction (600 GB/s bidirectional) x 8 bits/byte = 2.4 Tb/s
V100_NVLINK_BPS = 150e9 * 8  # 6 links x 25 GB/s per direction x 8 bits/byte = 1.2 Tb/s (BytePS §4.2.2)
SOCKET_BPS = 400e9  # QPI/UPI between CPU sockets, bits/s; BytePS: "> 300 Gb/s, not the bottleneck"
NIC_200G_BPS = 200e9  # bits/s
NIC_100G_BPS = 100e9  # bits/s


@dataclass(frozen=True, slots=True, kw_only=True)
class Part:
    """One node inside a host, by its local name (``gpu0``, ``pcie1``)."""

    name: str
    kind: NodeKind


@dataclass(frozen=True, slots=True, kw_only=True)
class Wire:
    """A duplex intra-host link between two parts (two directed links of ``capacity_bps`` each)."""

    a: str
    b: str
    capacity_bps: float
    kind: LinkKind


@dataclass(frozen=True, slots=True, kw_only=True)
class HostTemplate:
    """The inside of one server.

    ``gpu_nic[i]`` is the NIC of ``gpus[i]`` (its nearest one); ``nic_bps`` is the NIC line rate,
    the default speed of its access link.
    """

    name: str
    description: str
    parts: tuple[Part, ...]
    wires: tuple[Wire, ...]
    gpus: tuple[str, ...]
    nics: tuple[str, ...]
    gpu_nic: tuple[str, ...]
    nic_bps: float

    @property
    def n_gpus(self) -> int:
        return len(self.gpus)

    @property
    def n_nics(self) -> int:
        return len(self.nics)


def _parts(prefix: str, n: int, kind: NodeKind) -> list[Part]:
    return [Part(name=f"{prefix}{i}", kind=kind) for i in range(n)]


def _pcie(a: str, b: str, bps: float) -> Wire:
    return Wire(a=a, b=b, capacity_bps=bps, kind=LinkKind.PCIE)


def _nvlink_hub(n_gpus: int, bps: float) -> list[Wire]:
    return [Wire(a=f"gpu{i}", b="nvswitch0", capacity_bps=bps, kind=LinkKind.NVLINK) for i in range(n_gpus)]


def _paired(
    n_gpus: int, nics_per_switch: int, *, name: str, description: str, nic_bps: float
) -> HostTemplate:
    """GPUs in pairs under PCIe Gen4 switches, ``nics_per_switch`` NICs per switch, two CPUs, NVSwitch."""
    n_sw = (n_gpus + 1) // 2
    n_nics = n_gpus if nics_per_switch == 2 else n_sw
    parts = [
        *_parts("cpu", 2, NodeKind.CPU),
        Part(name="nvswitch0", kind=NodeKind.NVSWITCH),
        *_parts("pcie", n_sw, NodeKind.PCIE_SWITCH),
        *_parts("gpu", n_gpus, NodeKind.GPU),
        *_parts("nic", n_nics, NodeKind.NIC),
    ]
    wires = [_pcie("cpu0", "cpu1", SOCKET_BPS)]
    wires += [_pcie(f"pcie{s}", f"cpu{s * 2 // n_sw}", PCIE4_X16_BPS) for s in range(n_sw)]
    wires += [_pcie(f"gpu{g}", f"pcie{g // 2}", PCIE4_X16_BPS) for g in range(n_gpus)]
    wires += [_pcie(f"nic{k}", f"pcie{k // nics_per_switch}", PCIE4_X16_BPS) for k in range(n_nics)]
    wires += _nvlink_hub(n_gpus, A100_NVLINK_BPS)
    per_nic = 2 // nics_per_switch  # GPUs per NIC: 2 (shared) or 1 (rail)
    return HostTemplate(
        name=name,
        description=description,
        parts=tuple(parts),
        wires=tuple(wires),
        gpus=tuple(f"gpu{g}" for g in range(n_gpus)),
        nics=tuple(f"nic{k}" for k in range(n_nics)),
        gpu_nic=tuple(f"nic{min(g // per_nic, n_nics - 1)}" for g in range(n_gpus)),
        nic_bps=nic_bps,
    )


def a100_8gpu_4nic() -> HostTemplate:
    """8 A100 GPUs, 4 PCIe Gen4 switches each with 2 GPUs and 1 NIC (every two GPUs share a NIC).

    Parts: ``cpu0``/``cpu1`` (PCIe switches 0-1 under CPU 0, 2-3 under CPU 1), ``nvswitch0`` (NVLink
    2.4 Tb/s per GPU and direction), ``pcie0..3``, ``gpu0..7``, ``nic0..3`` (200 Gb/s); GPU ``g`` uses
    NIC ``g // 2``. This is the Crux testbed host (crux-spec §6.1).

    Examples
    --------
    >>> t = a100_8gpu_4nic()
    >>> t.n_gpus, t.n_nics, t.gpu_nic[5]
    (8, 4, 'nic2')
    """
    return _paired(
        8,
        1,
        name="a100_8gpu_4nic",
        description="8xA100, NVSwitch, 4 PCIe switches x (2 GPU + 1 NIC)",
        nic_bps=NIC_200G_BPS,
    )


def rail_host(n_gpus: int = 8, *, nic_bps: float = NIC_200G_BPS) -> HostTemplate:
    """``n_gpus`` GPUs with one NIC each (rail-optimised / vClos host), pairs of GPU+NIC under PCIe switches.

    Examples
    --------
    >>> t = rail_host(4)
    >>> t.gpu_nic
    ('nic0', 'nic1', 'nic2', 'nic3')
    """
    name = "rail_8gpu" if n_gpus == 8 else f"rail_{n_gpus}gpu"
    return _paired(
        n_gpus, 2, name=name, description=f"{n_gpus} GPUs, NVSwitch, one NIC per GPU", nic_bps=nic_bps
    )


def pcie_only() -> HostTemplate:
    """The BytePS PCIe-only machine (Fig. 6a): 2 PCIe Gen3 switches x 4 GPUs, NIC under CPU 0, no NVLink.

    ``pcie0`` (``gpu0..3``) hangs off ``cpu0``, ``pcie1`` (``gpu4..7``) off ``cpu1``; the 100 Gb/s
    ``nic0`` is attached to ``cpu0``; every GPU uses ``nic0``.
    """
    parts = [
        *_parts("cpu", 2, NodeKind.CPU),
        *_parts("pcie", 2, NodeKind.PCIE_SWITCH),
        *_parts("gpu", 8, NodeKind.GPU),
        Part(name="nic0", kind=NodeKind.NIC),
    ]
    wires = [_pcie("cpu0", "cpu1", SOCKET_BPS), _pcie("pcie0", "cpu0", PCIE3_X16_BPS)]
    wires += [_pcie("pcie1", "cpu1", PCIE3_X16_BPS), _pcie("nic0", "cpu0", PCIE3_X16_BPS)]
    wires += [_pcie(f"gpu{g}", f"pcie{g // 4}", PCIE3_X16_BPS) for g in range(8)]
    return HostTemplate(
        name="pcie_only",
        description="BytePS PCIe-only: 2 PCIe switches x 4 GPUs, NIC on CPU0",
        parts=tuple(parts),
        wires=tuple(wires),
        gpus=tuple(f"gpu{g}" for g in range(8)),
        nics=("nic0",),
        gpu_nic=("nic0",) * 8,
        nic_bps=NIC_100G_BPS,
    )


def nvlink_byteps() -> HostTemplate:
    """The BytePS NVLink machine (Fig. 8a): 4 PCIe Gen3 switches x 2 GPUs, NIC on ``pcie0``, NVLink hub.

    ``pcie0``/``pcie1`` under ``cpu0``, ``pcie2``/``pcie3`` under ``cpu1``; the 100 Gb/s ``nic0`` sits
    on ``pcie0`` (P0_CPU0) with ``gpu0``/``gpu1``; every GPU uses ``nic0``.
    """
    parts = [
        *_parts("cpu", 2, NodeKind.CPU),
        Part(name="nvswitch0", kind=NodeKind.NVSWITCH),
        *_parts("pcie", 4, NodeKind.PCIE_SWITCH),
        *_parts("gpu", 8, NodeKind.GPU),
        Part(name="nic0", kind=NodeKind.NIC),
    ]
    wires = [_pcie("cpu0", "cpu1", SOCKET_BPS), _pcie("nic0", "pcie0", PCIE3_X16_BPS)]
    wires += [_pcie(f"pcie{s}", f"cpu{s // 2}", PCIE3_X16_BPS) for s in range(4)]
    wires += [_pcie(f"gpu{g}", f"pcie{g // 2}", PCIE3_X16_BPS) for g in range(8)]
    wires += _nvlink_hub(8, V100_NVLINK_BPS)
    return HostTemplate(
        name="nvlink_byteps",
        description="BytePS NVLink: 4 PCIe switches x 2 GPUs, NIC on pcie0, NVLink",
        parts=tuple(parts),
        wires=tuple(wires),
        gpus=tuple(f"gpu{g}" for g in range(8)),
        nics=("nic0",),
        gpu_nic=("nic0",) * 8,
        nic_bps=NIC_100G_BPS,
    )


def single_gpu_nic() -> HostTemplate:
    """One GPU and one 100 Gb/s NIC on one PCIe Gen4 link, for simple fabrics."""
    return HostTemplate(
        name="single_gpu_nic",
        description="1 GPU, 1 NIC",
        parts=(Part(name="gpu0", kind=NodeKind.GPU), Part(name="nic0", kind=NodeKind.NIC)),
        wires=(_pcie("gpu0", "nic0", PCIE4_X16_BPS),),
        gpus=("gpu0",),
        nics=("nic0",),
        gpu_nic=("nic0",),
        nic_bps=NIC_100G_BPS,
    )


def host_templates() -> Registry[HostTemplate]:
    """A fresh registry of the named host templates (for scenario files and the CLI).

    Examples
    --------
    >>> sorted(host_templates().names())
    ['a100_8gpu_4nic', 'nvlink_byteps', 'pcie_only', 'rail_8gpu', 'single_gpu_nic']
    """
    reg: Registry[HostTemplate] = Registry("host template")
    for t in (a100_8gpu_4nic(), rail_host(8), pcie_only(), nvlink_byteps(), single_gpu_nic()):
        reg.register(t.name, t)
    return reg


def resolve_template(template: str | HostTemplate, *, where: str = "topology.host_template") -> HostTemplate:
    """A template given by name (looked up in :func:`host_templates`) or as an object."""
    if isinstance(template, HostTemplate):
        return template
    return host_templates().get(str(template), where=where)
