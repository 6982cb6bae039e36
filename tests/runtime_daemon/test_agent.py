"""The host agent: probe table or hash model for the port, DSCP from the class, life without the daemon."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from commsched.errors import InputError
from commsched.runtime.agent import (
    CounterSource,
    NullCounters,
    ProbeTable,
    answer,
    load_probe_table,
    parse_probe_table,
)
from commsched.runtime.agent.app import create_agent_app
from commsched.runtime.agent.counters import ProcNetDevCounters, counter_source
from commsched.runtime.agent.follower import Follower, read_state
from commsched.runtime.daemon import ClusterConfig, DaemonService, Store
from commsched.runtime.daemon.api import create_app
from tests.runtime_daemon.conftest import AUTH, TOKEN, LiveServer, wait_until

CFG = ClusterConfig(topology={"kind": "crux_testbed"}, heartbeat_timeout_s=60.0)


def test_probe_table_file_and_its_errors(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text(
        json.dumps(
            {"entries": [{"src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "path": [1, 2], "sport": 50000}]}
        )
    )
    assert load_probe_table(f).lookup("10.0.0.1", "10.0.0.2", (1, 2)) == 50000
    assert load_probe_table(f).lookup("10.0.0.1", "10.0.0.2", (2, 1)) is None
    rows = [{"src_ip": "a", "dst_ip": "b", "path": [3], "src_port": 49999}]
    assert parse_probe_table(rows).lookup("a", "b", (3,)) == 49999
    with pytest.raises(InputError, match=r"entries\[0\]\.sport"):
        parse_probe_table([{"src_ip": "a", "dst_ip": "b", "path": [3], "sport": 70000}])
    with pytest.raises(InputError, match=r"entries\[0\]\.path"):
        parse_probe_table([{"src_ip": "a", "dst_ip": "b", "path": "x", "sport": 5}])
    f.write_text("{not json")
    with pytest.raises(InputError, match=r"p\.json:1: not JSON"):
        load_probe_table(f)
    with pytest.raises(InputError, match="cannot read"):
        load_probe_table(tmp_path / "missing.json")


def test_counter_sources(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.write_text(
        "Inter-|   Receive |  Transmit\n face |bytes packets ...\n"
        "  eth0: 100 2 0 0 0 0 0 0 300 4 0 0 0 0 0 0\n    lo: 7 1 0 0 0 0 0 0 7 1 0 0 0 0 0 0\n"
    )
    got = ProcNetDevCounters(["eth0"], path=dev).read()
    assert got == {"eth0.rx_bytes": 100, "eth0.rx_packets": 2, "eth0.tx_bytes": 300, "eth0.tx_packets": 4}
    assert NullCounters().read() == {}
    assert isinstance(counter_source("netdev:eth0"), ProcNetDevCounters)
    with pytest.raises(InputError, match="--counters"):
        counter_source("snmp")


@pytest.fixture
def stack(tmp_path: Path, live: Callable[[Any], LiveServer]) -> Iterator[dict[str, Any]]:
    """A live daemon with two jobs; agents are made by the test through ``make_agent``."""
    svc = DaemonService(Store(tmp_path / "d.db"), default=CFG)
    dsrv = live(create_app(svc, token=TOKEN))
    client = httpx.Client(base_url=dsrv.url, timeout=10, headers=AUTH)
    followers: list[Follower] = []
    clients: list[httpx.Client] = []

    def make_agent(
        host: str, table: ProbeTable | None = None, counters: CounterSource | None = None
    ) -> tuple[Follower, httpx.Client]:
        f = Follower(
            daemon=dsrv.url,
            host=host,
            token=TOKEN,
            state_path=tmp_path / f"{host}.json",
            registration={"name": host, "nics": [{"id": f"{host}/nic0", "ip": "192.0.2.10"}]},
            wait_s=1.0,
        )
        followers.append(f)
        f.start()
        asrv = live(create_agent_app(f, table=table, counters=counters or NullCounters()))
        clients.append(httpx.Client(base_url=asrv.url, timeout=10))
        return f, clients[-1]

    yield {"svc": svc, "daemon": dsrv, "client": client, "make_agent": make_agent, "tmp": tmp_path}
    for f in followers:
        f.stop()
    for cl in clients:
        cl.close()
    client.close()
    dsrv.stop()
    svc.store.close()


def test_agent_follows_decisions_and_answers_ports(stack: dict[str, Any]) -> None:
    svc, c = stack["svc"], stack["client"]
    c.post("/v1/jobs", json={"id": "a", "hosts": ["h0", "h4"], "model": "bert"})
    follower, agent = stack["make_agent"]("h0")
    wait_until(lambda: follower.version == 1 and follower.registered, what="agent catches version 1")
    assert svc.hosts()["h0"]["nics"] == [{"id": "h0/nic0", "ip": "192.0.2.10"}]
    view = svc.host_view("h0").to_json()
    conn = view["connections"][0]
    r = agent.get("/v1/port", params={"job": "a", "src_rank": conn["src_rank"], "dst_rank": conn["dst_rank"]})
    out = r.json()
    job = view["jobs"]["a"]
    assert (out["src_port"], out["dscp"], out["tos"], out["source"]) == (
        conn["src_port"],
        job["dscp"],
        job["tos"],
        "hash-model",
    )
    assert out["version"] == 1 and out["stale"] is False
    # intra-host connection (rank 0 -> 1 on h0): DSCP, no port
    r = agent.get("/v1/port", params={"job": "a", "src_rank": 0, "dst_rank": 1}).json()
    assert r["src_port"] is None and r["dscp"] == job["dscp"]
    assert agent.get("/v1/port", params={"job": "zz", "src_rank": 0, "dst_rank": 1}).status_code == 404
    bad = agent.get("/v1/port", params={"job": "a", "src_rank": -1, "dst_rank": 1})
    assert bad.status_code == 422 and bad.json()["field"] == "query.src_rank" and bad.json()["error"]
    for r, code in ((agent.get("/v1/nosuch"), 404), (agent.delete("/v1/port"), 405)):
        assert r.status_code == code and set(r.json()) == {"error", "field"}  # the daemon's one shape
    # a new job: the agent learns the new version at once
    assert (
        c.post(
            "/v1/jobs", json={"id": "b", "hosts": ["h1", "h0"], "gpus_per_host": 4, "model": "gpt"}
        ).status_code
        == 409
    )
    assert c.post("/v1/jobs", json={"id": "b", "hosts": ["h5", "h1"], "model": "gpt"}).status_code == 201
    wait_until(lambda: follower.version == 2, timeout_s=2.0, what="agent catches version 2")
    assert set(agent.get("/v1/decision").json()["jobs"]) == {"a"}  # b has no GPU on h0
    assert svc.host_view("h5").jobs.keys() == {"b"}
    stored = read_state(follower.state_path)
    assert stored is not None and stored.version == 2 and stored.jobs.keys() == {"a"}


def test_probe_table_wins_over_the_hash_model(stack: dict[str, Any]) -> None:
    svc, c = stack["svc"], stack["client"]
    c.post("/v1/jobs", json={"id": "a", "hosts": ["h0", "h4"], "model": "bert"})
    view = svc.host_view("h0").to_json()
    conn = view["connections"][0]
    ip = view["nic_ips"]
    table = ProbeTable(ports={(ip[conn["src_nic"]], ip[conn["dst_nic"]], tuple(conn["links"])): 61234})
    follower, agent = stack["make_agent"]("h0", table)
    wait_until(lambda: follower.version == 1, what="agent catches version 1")
    r = agent.get(
        "/v1/port", params={"job": "a", "src_rank": conn["src_rank"], "dst_rank": conn["dst_rank"]}
    ).json()
    assert (r["src_port"], r["source"]) == (61234, "probe")


def test_agent_keeps_serving_without_the_daemon_and_restarts_from_disk(stack: dict[str, Any]) -> None:
    c = stack["client"]
    c.post("/v1/jobs", json={"id": "a", "hosts": ["h0", "h4"], "model": "bert"})
    follower, agent = stack["make_agent"]("h4")
    wait_until(lambda: follower.version == 1, what="agent catches version 1")
    conn = stack["svc"].host_view("h4").to_json()["connections"][0]
    ranks = {"job": "a", "src_rank": conn["src_rank"], "dst_rank": conn["dst_rank"]}
    before = agent.get("/v1/port", params=ranks).json()
    assert before["src_port"] is not None
    stack["daemon"].stop()
    wait_until(lambda: not follower.connected, what="agent notices the daemon is away")
    after = agent.get("/v1/port", params=ranks).json()
    assert (
        after["stale"] is True and after["src_port"] == before["src_port"] and after["dscp"] == before["dscp"]
    )
    follower.stop()
    # agent restart while the daemon is still away: it answers from its state file at once
    again = Follower(
        daemon=stack["daemon"].url,
        host="h4",
        token=TOKEN,
        state_path=follower.state_path,
        registration={"name": "h4"},
        wait_s=1.0,
    )
    try:
        assert again.version == 1
        out = answer(again.host_view, None, "a", conn["src_rank"], conn["dst_rank"])
        assert out is not None and out.src_port == before["src_port"]
    finally:
        again._client.close()


def test_agent_reports_link_counters_when_asked(stack: dict[str, Any]) -> None:
    dev = stack["tmp"] / "netdev"
    dev.write_text("h\nh\n  veth0: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n")
    follower, agent = stack["make_agent"]("h0", None, ProcNetDevCounters(path=dev))
    wait_until(lambda: follower.registered, what="agent registered")
    local = agent.get("/v1/counters").json()
    assert local["counters"]["veth0.tx_bytes"] == 2000 and local["reported"] is False
    assert stack["svc"].hosts()["h0"]["counters"] is None
    assert agent.get("/v1/counters", params={"report": "true"}).json()["reported"] is True
    assert stack["svc"].hosts()["h0"]["counters"]["veth0.rx_packets"] == 10
