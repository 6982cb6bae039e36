"""The :class:`Testbed` handle: what a runtime needs to run on a built testbed.

Load one by name; it knows each host's namespace and NIC addresses, the interface of every emulated
link (for counters), how to start a process inside a host, the rate scale, and the probe results
(a source port per equal-cost path) saved beside its state file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from commsched.errors import InputError
from commsched.testbed import build, netns
from commsched.testbed.counters import CounterSampler
from commsched.testbed.layout import Layout, plan_layout
from commsched.testbed.pinning import plan_paths
from commsched.testbed.probe import ProbeResult, nic_pairs, probe
from commsched.testbed.scale import scale_bytes
from commsched.testbed.state import TestbedState, probe_path, read_state
from commsched.topology import HostId, LinkId, NodeId, Topology


class Testbed:
    """A built testbed, loaded from its state file.

    Examples
    --------
    ::

        tb = Testbed.load("demo")
        tb.host_namespace("h3")                  # 'demo-h3'
        tb.nic_address("h3/nic0")                # '10.0.3.1'
        tb.exec_argv("h3", ["python", "w.py"])   # ['ip', 'netns', 'exec', 'demo-h3', 'python', 'w.py']
        tb.link_interface(12)                    # ('demo-tor1', 'c12')
        port = tb.source_port("h0/nic0", "h3/nic0", path.links, dport=5000)
    """

    __test__ = False  # not a pytest test class

    def __init__(self, state: TestbedState) -> None:
        self.state = state
        self.topology: Topology = build.topology_of(state)
        self.layout: Layout = plan_layout(self.topology, state.name)
        self._egress = self.layout.egress()

    @classmethod
    def load(cls, name: str) -> Testbed:
        return cls(read_state(name))

    @property
    def name(self) -> str:
        return self.state.name

    @property
    def rate_scale(self) -> float:
        """Every link rate is the topology's capacity times this factor (see :mod:`.scale`)."""
        return self.state.rate_scale

    def scale_bytes(self, size_bytes: float) -> int:
        """A workload byte count scaled like the rates (:func:`commsched.testbed.scale.scale_bytes`)."""
        return scale_bytes(size_bytes, self.rate_scale)

    def host_namespace(self, host: HostId | str) -> str:
        self.topology.host(host)
        return self.layout.netns(host)

    def host_addresses(self, host: HostId | str) -> dict[NodeId, str]:
        """NIC node -> IPv4 address, for every NIC of a host."""
        return {nic: self.layout.nic_ip[nic] for nic in self.topology.host(host).nics}

    def nic_address(self, nic: NodeId | str) -> str:
        try:
            return self.layout.nic_ip[NodeId(nic)]
        except KeyError:
            raise InputError(f"{nic!r} is not a NIC of testbed {self.name!r}", where="nic") from None

    def link_interface(self, link: LinkId | int) -> tuple[str, str]:
        """(namespace, interface) whose transmitted bytes are directed link ``link``'s load."""
        try:
            return self._egress[LinkId(int(link))]
        except KeyError:
            raise InputError(
                f"link {link} is not emulated (intra-host links are not)",
                where="link",
                expected="a network link id",
            ) from None

    def exec_argv(self, host: HostId | str, argv: Sequence[str]) -> list[str]:
        """The command line that runs ``argv`` inside host ``host``'s namespace."""
        return ["ip", "netns", "exec", self.host_namespace(host), *argv]

    def nsenter_argv(self, host: HostId | str, argv: Sequence[str]) -> list[str]:
        """``argv`` inside ``host``'s network namespace, keeping the caller's mount namespace.

        Unlike :meth:`exec_argv` (``ip netns exec`` remounts ``/sys``), the cgroup hierarchy under
        ``/sys/fs/cgroup`` stays visible: what a host agent that enforces by cgroup needs.
        """
        return ["nsenter", f"--net={netns.NETNS_DIR / self.host_namespace(host)}", *argv]

    def scaled_capacity_bps(self) -> dict[LinkId, float]:
        """Emulated rate of every emulated link (capacity x rate scale)."""
        return {lk: float(self.topology.capacity_bps[lk]) * self.rate_scale for lk in self._egress}

    def sampler(self) -> CounterSampler:
        """A per-link utilisation sampler under the simulator's link ids."""
        return CounterSampler(self.layout, self.scaled_capacity_bps())

    def probe(
        self, *, dport: int, pairs: Sequence[tuple[NodeId, NodeId]] | None = None, limit: int = 64
    ) -> ProbeResult:
        """Probe (a seeded sample of ``limit``) NIC pairs for a port per path, and save the result."""
        chosen = (
            list(pairs) if pairs is not None else nic_pairs(self.topology, limit=limit, seed=self.state.seed)
        )
        res = probe(self.topology, self.layout, chosen, dport=dport)
        probe_path(self.name).write_text(json.dumps(res.to_json()))
        return res

    def probe_result(self) -> ProbeResult:
        """The saved probe result (``commsched testbed probe`` writes it)."""
        path = probe_path(self.name)
        try:
            return ProbeResult.from_json(json.loads(path.read_text()))
        except FileNotFoundError:
            raise InputError(
                f"testbed {self.name!r} was not probed",
                where=str(path),
                expected="'commsched testbed probe' first",
            ) from None

    def plan_ports(self, plan: Mapping[str, Any], *, dport: int, where: str = "plan") -> list[dict[str, Any]]:
        """The testbed's source port for each network connection of ``commsched plan --json`` output.

        The plan's own ``src_port`` comes from commsched's hash model, not the kernel's; this probes the
        plan's NIC pairs on the routers (saving the result) and returns, per connection, the port
        that puts it on its planned path towards ``dport`` (``None`` when no probed port reaches it).
        """
        planned = plan_paths(self.topology, plan, where=where)
        pairs = list(dict.fromkeys((p.src, p.dst) for p in planned))
        res = self.probe(dport=dport, pairs=pairs)
        return [
            {
                "connection": p.index,
                "job": p.job,
                "src_nic": p.src,
                "dst_nic": p.dst,
                "links": [int(x) for x in p.links],
                "src_port": res.pair(p.src, p.dst).ports.get(p.links),
            }
            for p in planned
        ]

    def source_port(self, src: NodeId | str, dst: NodeId | str, links: Sequence[int], *, dport: int) -> int:
        """The saved probe's source port for path ``links`` of ``src -> dst`` (probed for ``dport``)."""
        res = self.probe_result()
        if res.dport != dport:
            raise InputError(f"probe was made for port {res.dport}", where="dport", expected=str(res.dport))
        return res.source_port(src, dst, links)
