"""The agent's ``GET /metrics``: parsed by prometheus_client's own parser, moving with the decisions it
follows and with what its probing oracle records; the fixed address answers other hosts only with the
token. (The per-job counters of an enforcing agent: tests/real_jobs/test_teardown_root.py.)"""

from __future__ import annotations

import io
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families

from commsched.runtime.agent import NullCounters
from commsched.runtime.agent.app import create_agent_app
from commsched.runtime.agent.follower import Follower
from commsched.runtime.agent.metrics import AgentMetrics, guard, serve_metrics
from commsched.runtime.daemon import ClusterConfig, DaemonService, Store
from commsched.runtime.daemon.api import create_app
from tests.runtime_daemon.conftest import AUTH, TOKEN, LiveServer, Proc, start_process, wait_until
from tests.runtime_daemon.test_faults import _free_port

CFG = ClusterConfig(topology={"kind": "crux_testbed"}, heartbeat_timeout_s=0.0, profiling_window_s=0.0)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    out: Samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def agent(tmp_path: Path, live: Callable[[Any], LiveServer]) -> Iterator[dict[str, Any]]:
    svc = DaemonService(Store(tmp_path / "d.db"), default=CFG)
    dsrv = live(create_app(svc, token=TOKEN))
    f = Follower(
        daemon=dsrv.url,
        host="h0",
        token=TOKEN,
        state_path=tmp_path / "h0.json",
        registration={"name": "h0", "nics": [{"id": "h0/nic0", "ip": "192.0.2.10"}]},
        wait_s=1.0,
    )
    metrics = AgentMetrics(f)
    # the app is built before the follower talks to the daemon (building FastAPI routes while another
    # thread validates requests has been seen to trip a warning of pydantic's schema cache)
    app = create_agent_app(f, table=None, counters=NullCounters(), metrics=metrics)
    f.start()
    asrv = live(app)
    with httpx.Client(base_url=dsrv.url, headers=AUTH, timeout=10) as d, httpx.Client(base_url=asrv.url) as a:
        yield {"follower": f, "metrics": metrics, "daemon": d, "agent": a}
    f.stop()
    svc.store.close()


def test_agent_metrics_move_with_decisions_and_probes(agent: dict[str, Any]) -> None:
    f, metrics, d, a = agent["follower"], agent["metrics"], agent["daemon"], agent["agent"]
    wait_until(lambda: f.connected, what="the agent follows the daemon")
    r = a.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    s = parse(r.text)
    assert value(s, "commsched_agent_decision_version") == 0
    assert value(s, "commsched_agent_connected") == 1
    assert value(s, "commsched_agent_probes_sent_total") == 0
    received = []
    for k, gpus in enumerate((["h0/gpu0", "h4/gpu0"], ["h0/gpu1", "h5/gpu0"]), start=1):
        body = {"id": f"j{k}", "gpu_ids": gpus, "compute_s": 0.1, "comm_bytes": 1e6}
        assert d.post("/v1/jobs", json=body).status_code == 201
        wait_until(lambda k=k: f.version == k, what=f"version {k}")  # type: ignore[misc]
        s = parse(a.get("/metrics").text)
        assert value(s, "commsched_agent_decision_version") == k
        received.append(value(s, "commsched_agent_decisions_received_total"))
    assert received[0] >= 1 and received[1] == received[0] + 1  # one view per new version

    # what a probing oracle records: 5 probes out, 3 answered, two searches of 0.3 s and 2.5 s
    metrics.probes.probe_sent(4)
    metrics.probes.probe_sent()
    metrics.probes.probe_answered(3)
    metrics.probes.search_took(0.3)
    metrics.probes.search_took(2.5)
    s = parse(a.get("/metrics").text)
    assert value(s, "commsched_agent_probes_sent_total") == 5
    assert value(s, "commsched_agent_probes_answered_total") == 3
    assert value(s, "commsched_agent_probe_search_seconds_count") == 2
    assert value(s, "commsched_agent_probe_search_seconds_sum") == pytest.approx(2.8)
    assert value(s, "commsched_agent_probe_search_seconds_bucket", le="0.25") == 0
    assert value(s, "commsched_agent_probe_search_seconds_bucket", le="0.5") == 1
    assert value(s, "commsched_agent_probe_search_seconds_bucket", le="3.0") == 2


def test_two_agents_in_one_process_count_apart(agent: dict[str, Any]) -> None:
    other = AgentMetrics(agent["follower"])
    other.probes.probe_sent(7)
    assert value(parse(agent["agent"].get("/metrics").text), "commsched_agent_probes_sent_total") == 0
    body, _ = other.render()
    assert value(parse(body.decode()), "commsched_agent_probes_sent_total") == 7


def test_fixed_address_needs_the_token_from_other_hosts(agent: dict[str, Any]) -> None:
    metrics = agent["metrics"]
    metrics.probes.probe_sent(2)
    server = serve_metrics(metrics, host="127.0.0.1", port=0, token=TOKEN)
    try:
        url = f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(url + "/metrics", timeout=10) as r:  # loopback: as the daemon's reads
            assert value(parse(r.read().decode()), "commsched_agent_probes_sent_total") == 2
        assert httpx.get(url + "/other", timeout=10).status_code == 404
    finally:
        server.close()

    calls: list[str] = []

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        calls.append(environ["PATH_INFO"])
        start_response("200 OK", [])
        return [b"ok"]

    def ask(remote: str, auth: str | None) -> str:
        status: list[str] = []
        env = {"PATH_INFO": "/metrics", "REMOTE_ADDR": remote, "wsgi.input": io.BytesIO()}
        if auth is not None:
            env["HTTP_AUTHORIZATION"] = auth
        guard(app, TOKEN)(env, lambda st, headers: status.append(st))
        return status[0].split()[0]

    assert ask("192.0.2.7", None) == "401"
    assert ask("192.0.2.7", "Bearer wrong-token") == "401"
    assert ask("192.0.2.7", f"Bearer {TOKEN}") == "200"
    assert ask("::1", None) == "200"
    assert calls == ["/metrics", "/metrics"]
    status: list[str] = []
    guard(app, None)({"PATH_INFO": "/metrics", "REMOTE_ADDR": "192.0.2.7"}, lambda st, h: status.append(st))
    assert status == ["401 Unauthorized"]  # an agent without a token serves loopback only


def test_agent_command_serves_metrics_on_its_fixed_address(tmp_path: Path, procs: list[Proc]) -> None:
    """``commsched agent --metrics-listen HOST:PORT`` as a process: the daemon's ``/metrics`` and the
    agent's, both parsed, the agent's following the daemon's decisions."""
    (tmp_path / "tok").write_text(TOKEN + "\n")
    procs.append(
        start_process(
            ["daemon", "--db", str(tmp_path / "d.db"), "--listen", "127.0.0.1:0", "--token-file",
             str(tmp_path / "tok"), "--topology", "crux_testbed"],
            tmp_path,
        )
    )  # fmt: skip
    daemon = procs[-1].url
    port = _free_port()
    procs.append(
        start_process(
            ["agent", "--daemon", daemon, "--host", "h0", "--token-file", str(tmp_path / "tok"), "--state",
             str(tmp_path / "h0.json"), "--wait", "1", "--metrics-listen", f"127.0.0.1:{port}"],
            tmp_path,
        )
    )  # fmt: skip
    with httpx.Client(base_url=daemon, headers=AUTH, timeout=10) as d:
        body = {"id": "a", "gpu_ids": ["h0/gpu0", "h4/gpu0"], "compute_s": 0.1, "comm_bytes": 1e6}
        assert d.post("/v1/jobs", json=body).status_code == 201
        assert (
            value(parse(d.get("/metrics").text), "commsched_daemon_decisions_total", cause="job-start") == 1
        )

    def version() -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            return value(parse(r.read().decode()), "commsched_agent_decision_version")

    wait_until(lambda: version() == 1, what="the agent's metrics show version 1")
