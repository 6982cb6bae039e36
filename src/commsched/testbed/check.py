"""``commsched testbed check``: real TCP flows on a built testbed against what commsched predicts.

Three measurements, each with real packets and the kernel's byte counters:

* **Path prediction.** Probe ports (:mod:`.probe`) are replayed as real connections, one at a time;
  the links whose counters grew by at least half the bytes sent must be exactly the path's links.
* **Shaping.** One flow per kind of limiting link (e.g. a host's access link, a ToR uplink); the
  wire rate on the limiting link's egress over the steady part of the flow (:class:`_LinkMeter`)
  against the scaled capacity. Up to five runs, median (the machine is shared).
* **Strict priority.** Two flows from two hosts to one NIC, DSCP 46 (class 0) and DSCP 0 (lowest
  class); the high class's share of the link where they meet: its part of the HTB class counters
  times the link's measured use. Needs three hosts; on smaller fabrics the priority keys are absent.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from commsched.errors import TestbedError
from commsched.testbed import counters, flows, netns
from commsched.testbed.handle import Testbed
from commsched.testbed.htb import class_bytes_sent, class_of_dscp
from commsched.testbed.probe import PathKey, ProbeResult, nic_pairs
from commsched.topology import LinkId, NodeId

HIGH_DSCP = 46
LOW_DSCP = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckSettings:
    """How much traffic ``check`` sends (defaults: a few seconds on a small fabric)."""

    pairs: int = 16
    connections: int = 48
    probe_bytes: int = 200_000
    flow_s: float = 2.0
    warmup_s: float = 0.5
    shaping_target: float = 0.03
    max_runs: int = 5  # repeat a shaping / priority measurement while its median misses the target


@dataclass(frozen=True, slots=True, kw_only=True)
class Shaping:
    """The measured wire rate of one link (bits/s) against its scaled rate."""

    link: LinkId
    rate_bps: float
    measured_bps: float

    @property
    def error(self) -> float:
        return abs(self.measured_bps / self.rate_bps - 1.0)


def _priority_pairs(tb: Testbed) -> tuple[tuple[NodeId, NodeId], tuple[NodeId, NodeId]]:
    hosts = tb.topology.hosts
    if len(hosts) < 3:
        raise TestbedError("the priority check needs at least three hosts")
    d = hosts[-1].nics[0]
    return (hosts[0].nics[0], d), (hosts[1].nics[0], d)


def _replay(tb: Testbed, res: ProbeResult, st: CheckSettings, rx: flows.Receiver) -> tuple[int, list[str]]:
    """Send each chosen (pair, path, port) as a connection; count the ones that load exactly the path."""
    queue: list[tuple[NodeId, NodeId, PathKey, int]] = []
    depth = 0
    while len(queue) < st.connections:
        added = False
        for p in res.pairs:
            items = list(p.ports.items())
            if depth < len(items):
                queue.append((p.src, p.dst, *items[depth]))
                added = True
                if len(queue) >= st.connections:
                    break
        if not added:
            break
        depth += 1
    ok, bad = 0, []
    lay = tb.layout
    for i, (src, dst, links, sport) in enumerate(queue):
        before = counters.link_bytes(lay)
        sock = flows.connect(lay.netns(lay.nic_host[src]), lay.nic_ip[src], sport, lay.nic_ip[dst], res.dport)
        flows.send_bytes(sock, st.probe_bytes)
        if not rx.wait_closed(i + 1):
            raise TestbedError(f"connection {src} -> {dst} sport {sport} did not finish")
        moved = counters.delta(counters.link_bytes(lay), before)
        loaded = {lk for lk, b in moved.items() if b >= st.probe_bytes // 2}
        if loaded == set(links):
            ok += 1
        else:
            bad.append(f"{src}->{dst} sport {sport}: expected {sorted(links)}, loaded {sorted(loaded)}")
    return ok, bad


def _receiver(tb: Testbed, dport: int = 0) -> tuple[flows.Receiver, int]:
    """Listeners on one port in every host namespace (port 0: a free one, then the same elsewhere)."""
    lay = tb.layout
    first = flows.listener(lay.netns(lay.hosts[0]), dport)
    port = int(first.getsockname()[1])
    rest = [flows.listener(lay.netns(h), port) for h in lay.hosts[1:]]
    return flows.Receiver([first, *rest]).start(), port


def verify_ports(tb: Testbed, res: ProbeResult, connections: int) -> tuple[int, list[str]]:
    """Replay up to ``connections`` probed ports as real connections (to ``res.dport``).

    Returns the number that loaded exactly their path's links, and a line per one that did not.
    """
    rx, _ = _receiver(tb, res.dport)
    try:
        return _replay(tb, res, CheckSettings(connections=connections), rx)
    finally:
        rx.stop()


def _limiting(tb: Testbed, links: PathKey) -> LinkId:
    caps = tb.topology.capacity_bps
    low = min(float(caps[lk]) for lk in links)
    return next(lk for lk in links if float(caps[lk]) == low)


class _LinkMeter:
    """Wire rate of one egress over a window, without the timing error of a ``tc`` process.

    ``/proc/net/dev`` is read in-process (microseconds, so the window is timed exactly) but counts a
    GSO packet's headers once; the HTB parent class counts every segment's headers (the bytes the
    shaper charges) but is read by a ``tc`` process whose start-up delay varies on a busy machine.
    Both counters are therefore read while the link is idle, before and after the flows, and their
    ratio converts the exactly timed ``/proc`` rate into wire bits per second.
    """

    def __init__(self, tb: Testbed, link: LinkId) -> None:
        self.ns, self.iface = tb.link_interface(link)
        self.classes0 = _class_bytes(self.ns, self.iface)
        self.dev0 = self.dev()
        self.window: list[tuple[float, int]] = []

    def dev(self) -> int:
        return netns.dev_counters(self.ns)[self.iface][1]

    def mark(self) -> None:
        """Read the timed counter (call at the start and the end of the steady window)."""
        self.window.append((time.monotonic(), self.dev()))

    def finish(self) -> tuple[float, dict[str, int]]:
        """(wire rate over the window in bits/s, bytes per HTB class over the whole run)."""
        time.sleep(0.05)  # let the queue drain: both counters are read on an idle link
        classes1, dev1 = _class_bytes(self.ns, self.iface), self.dev()
        ratio = (classes1["1:1"] - self.classes0["1:1"]) / max(1, dev1 - self.dev0)
        (t0, b0), (t1, b1) = self.window[0], self.window[-1]
        wire_bps = (b1 - b0) * 8.0 / (t1 - t0) * ratio  # bytes -> bits
        return wire_bps, {k: classes1[k] - self.classes0.get(k, 0) for k in classes1}


def _one_flow(
    tb: Testbed, res: ProbeResult, case: tuple[NodeId, NodeId, int, LinkId], st: CheckSettings
) -> float:
    src, dst, sport, link = case
    lay = tb.layout
    meter = _LinkMeter(tb, link)
    sock = flows.connect(lay.netns(lay.nic_host[src]), lay.nic_ip[src], sport, lay.nic_ip[dst], res.dport)
    sender = flows.TimedSender(sock, st.flow_s)
    sender.start()
    time.sleep(st.warmup_s)
    meter.mark()
    time.sleep(st.flow_s - st.warmup_s - 0.2)
    meter.mark()
    sender.join()
    return meter.finish()[0]


def _shaping(tb: Testbed, res: ProbeResult, st: CheckSettings) -> list[Shaping]:
    cases: dict[tuple[str, float], tuple[NodeId, NodeId, int, LinkId]] = {}
    for p in res.pairs:
        for links, sport in p.ports.items():
            lk = _limiting(tb, links)
            key = (str(tb.topology.links[lk].kind), float(tb.topology.capacity_bps[lk]))
            cases.setdefault(key, (p.src, p.dst, sport, lk))
    out = []
    for case in cases.values():
        rate = float(tb.topology.capacity_bps[case[3]]) * tb.rate_scale
        runs = [_one_flow(tb, res, case, st)]
        while abs(statistics.median(runs) / rate - 1) > st.shaping_target and len(runs) < st.max_runs:
            runs.append(_one_flow(tb, res, case, st))
        out.append(Shaping(link=case[3], rate_bps=rate, measured_bps=statistics.median(runs)))
    return out


def measure_shaping(tb: Testbed, src: NodeId, dst: NodeId, *, flow_s: float = 2.0, runs: int = 3) -> Shaping:
    """One flow ``src -> dst`` (median of ``runs``): the rate on its limiting link against the scaled rate."""
    rx, dport = _receiver(tb)
    try:
        res = tb.probe(dport=dport, pairs=[(src, dst)])
        links, sport = next(iter(res.pair(src, dst).ports.items()))
        link = _limiting(tb, links)
        st = CheckSettings(flow_s=flow_s)
        measured = statistics.median(_one_flow(tb, res, (src, dst, sport, link), st) for _ in range(runs))
    finally:
        rx.stop()
    return Shaping(
        link=link, rate_bps=float(tb.topology.capacity_bps[link]) * tb.rate_scale, measured_bps=measured
    )


def _class_bytes(ns: str, iface: str) -> dict[str, int]:
    text = netns.run(["tc", "-s", "-n", ns, "class", "show", "dev", iface])  # no JSON for HTB classes
    return class_bytes_sent(text)


def _priority_once(tb: Testbed, res: ProbeResult, st: CheckSettings) -> tuple[LinkId, float, float]:
    (s1, d), (s2, _) = _priority_pairs(tb)
    p1, p2 = res.pair(s1, d), res.pair(s2, d)
    (l1, port1), (l2, port2) = next(iter(p1.ports.items())), next(iter(p2.ports.items()))
    meet = next(lk for lk in l1 if lk in set(l2))
    rate = float(tb.topology.capacity_bps[meet]) * tb.rate_scale
    lay = tb.layout
    senders = []
    for src, port, dscp in ((s1, port1, HIGH_DSCP), (s2, port2, LOW_DSCP)):
        ns_src = lay.netns(lay.nic_host[src])
        sock = flows.connect(ns_src, lay.nic_ip[src], port, lay.nic_ip[d], res.dport, dscp=dscp)
        senders.append(flows.TimedSender(sock, st.flow_s))
    meter = _LinkMeter(tb, meet)
    for s in senders:
        s.start()
    time.sleep(st.warmup_s)
    meter.mark()
    split0 = _class_bytes(meter.ns, meter.iface)  # the classes' split: a ratio, robust to tc's delay
    time.sleep(st.flow_s - st.warmup_s - 0.2)
    meter.mark()
    split1 = _class_bytes(meter.ns, meter.iface)
    for s in senders:
        s.join()
    wire_bps, _ = meter.finish()
    hi, lo = f"1:{class_of_dscp(HIGH_DSCP)}", f"1:{class_of_dscp(LOW_DSCP)}"
    d_hi, d_lo = split1[hi] - split0[hi], split1[lo] - split0[lo]
    used = wire_bps / rate  # fraction of the link the two classes used in the steady window
    return meet, used * d_hi / max(1, d_hi + d_lo), used * d_lo / max(1, d_hi + d_lo)


def _priority(tb: Testbed, res: ProbeResult, st: CheckSettings) -> dict[str, Any]:
    """High and low class shares of the meeting link (median of up to ``max_runs`` runs)."""
    runs = [_priority_once(tb, res, st)]
    while statistics.median(r[1] for r in runs) < 1 - 2 * st.shaping_target and len(runs) < st.max_runs:
        runs.append(_priority_once(tb, res, st))
    return {
        "priority_link": int(runs[0][0]),
        "priority_high_share": statistics.median(r[1] for r in runs),
        "priority_low_share": statistics.median(r[2] for r in runs),
        "priority_runs": len(runs),
    }


def run_check(tb: Testbed, settings: CheckSettings | None = None) -> dict[str, Any]:
    """Run the three measurements; return one JSON-ready report (fractions, rates in bits/s)."""
    st = settings or CheckSettings()
    rx, dport = _receiver(tb)
    try:
        pairs = nic_pairs(tb.topology, limit=st.pairs, seed=tb.state.seed)
        for extra in _priority_pairs(tb) if len(tb.topology.hosts) >= 3 else ():
            if extra not in pairs:
                pairs.append(extra)
        started = time.monotonic()
        res = tb.probe(dport=dport, pairs=pairs)
        probe_s = time.monotonic() - started
        ok, bad = _replay(tb, res, st, rx)
        shaping = _shaping(tb, res, st)
        prio = _priority(tb, res, st) if len(tb.topology.hosts) >= 3 else {}
    finally:
        rx.stop()
    checked = ok + len(bad)
    return {
        "testbed": tb.name,
        "rate_scale": tb.rate_scale,
        "routing": tb.state.routing,
        "probed_pairs": len(res.pairs),
        "probe_coverage": res.coverage,
        "probe_s": probe_s,
        "path_connections": checked,
        "path_prediction": ok / checked if checked else 0.0,
        "path_mismatches": bad[:10],
        "shaping": [
            {"link": int(s.link), "rate_bps": s.rate_bps, "measured_bps": s.measured_bps, "error": s.error}
            for s in shaping
        ],
        "shaping_error_max": max((s.error for s in shaping), default=0.0),
        **prio,
    }
