"""Two checks of the daemon's metrics that a plausible slip would pass unnoticed otherwise:

* the missed-heartbeat counter adds each tick's time-outs (two time-outs in two separate ticks read 2,
  as the store's event log has two ``heartbeat-timeout`` events), it is not set to the last tick's;
* the link series' ``src``/``dst`` labels are the link's own ends: the nodes the decision's connection
  paths cross the link between (``path[i] -> path[i + 1]`` for ``links[i]``), and the topology's.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("prometheus_client")

from commsched.topology import crux_testbed
from tests.runtime_daemon.conftest import AUTH
from tests.runtime_daemon.test_metrics import scrape, stack, value

__all__ = ["stack"]  # the fixture, used by name below


def test_missed_heartbeats_add_up_over_ticks(stack: Any) -> None:
    svc, c, clock = stack
    for job, hosts in (("a", ["h0", "h4"]), ("b", ["h1", "h5"])):
        body = {"id": job, "hosts": hosts, "gpus_per_host": 1, "compute_s": 0.2, "comm_bytes": 4e6}
        assert c.post("/v1/jobs", json=body, headers=AUTH).status_code == 201
    clock.t += 6.0
    assert c.post("/v1/jobs/b/heartbeat", headers=AUTH).status_code == 200
    clock.t += 5.0
    svc.tick()  # a: 11 s silent, b: 5 s
    clock.t += 6.0
    svc.tick()  # b: 11 s silent
    events = c.get("/v1/events", params={"limit": 1000}).json()
    timeouts = [e for e in events if e.get("kind") == "heartbeat-timeout"]
    assert len(timeouts) == 2, events
    s, _ = scrape(c)
    assert value(s, "commsched_daemon_heartbeats_missed_total") == len(timeouts)


def test_link_series_name_each_links_own_ends(stack: Any) -> None:
    _svc, c, _clock = stack
    body = {"id": "a", "hosts": ["h0", "h4"], "gpus_per_host": 2, "compute_s": 0.2, "comm_bytes": 4e6}
    assert c.post("/v1/jobs", json=body, headers=AUTH).status_code == 201
    doc = c.get("/v1/decisions/latest").json()
    ends: dict[str, tuple[str, str]] = {}
    for conn in doc["connections"]:
        for i, link in enumerate(conn["links"]):
            ends[str(link)] = (conn["path"][i], conn["path"][i + 1])
    topo = crux_testbed()
    for link, (src, dst) in ends.items():
        lk = topo.link(int(link))
        assert (str(lk.src), str(lk.dst)) == (src, dst)  # the two references agree
    s, _ = scrape(c)
    for name in (
        "commsched_daemon_link_planned_bytes_per_iteration",
        "commsched_daemon_link_planned_jobs",
        "commsched_daemon_link_capacity_bits_per_second",
    ):
        got = {dict(k[1])["link"]: (dict(k[1])["src"], dict(k[1])["dst"]) for k in s if k[0] == name}
        assert got and got == ends, (name, got, ends)
