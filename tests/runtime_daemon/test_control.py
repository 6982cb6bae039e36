"""The control path's records: round trips, refusals naming the field, and decision -> socket end to end."""

from __future__ import annotations

import copy
import json
import socket
import socketserver
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from commsched.errors import InputError
from commsched.runtime import AgentPolicy, mark_for_class
from commsched.runtime.agent.ports import answer
from commsched.runtime.daemon import ClusterConfig, JobRecord
from commsched.runtime.daemon.decide import decision
from commsched.runtime.protocol.control import Cause, Decision, HostView, PortAnswer
from commsched.runtime.transport.policy import get_dscp, set_dscp
from commsched.topology.builders import build_topology

CFG = ClusterConfig(topology={"kind": "crux_testbed"})
JOB_KEYS = {
    "rank",
    "class",
    "dscp",
    "tos",
    "profiling",
    "gpus",
    "hosts",
    "intensity",
    "k",
    "compute_s",
    "comm_bytes",
}
CONN_KEYS = set(
    [
        "job",
        "src_rank",
        "dst_rank",
        "src",
        "dst",
        "src_nic",
        "dst_nic",
        "path_index",
        "n_paths",
        "path",
        "links",
        "src_port",
        "share",
    ]
)
PORT_KEYS = set(
    [
        "version",
        "job",
        "src_rank",
        "dst_rank",
        "class",
        "dscp",
        "tos",
        "src_port",
        "path",
        "links",
        "source",
        "stale",
        "api",
    ]
)


def _job(jid: str, hosts: list[int], *, profiling: bool = False, started_s: float = 0.0) -> JobRecord:
    gpus = tuple(f"h{h}/gpu{g}" for h in hosts for g in range(8))
    return JobRecord(
        id=jid, gpus=gpus, compute_s=0.1, comm_bytes=4e8, overlap=0.5, collective="ring", model=None,
        started_s=started_s, profiling=profiling, profiling_until_s=started_s + 30,
    )  # fmt: skip


@pytest.fixture(scope="module")
def made() -> Decision:
    topo = build_topology("crux_testbed", {})
    jobs = [_job("a", [0, 4]), _job("b", [1, 5], profiling=True, started_s=1.0)]
    return decision(topo, CFG, jobs, version=3, cause=Cause(kind="job-start", job="b"))


def test_the_json_keys_are_the_api_contract(made: Decision) -> None:
    doc = made.to_json()
    assert {
        "format",
        "version",
        "policy",
        "hash",
        "priority_levels",
        "cause",
        "jobs",
        "connections",
        "link_load",
    } == set(doc)
    assert all(set(j) == JOB_KEYS for j in doc["jobs"].values())
    assert doc["connections"] and all(set(c) == CONN_KEYS for c in doc["connections"])
    view = HostView.of(made, "h0", {"h0/nic0": "10.0.0.1"}).to_json()
    assert {"host", "jobs", "connections", "inbound", "nic_ips", "format", "version"} <= set(view)
    conn = view["connections"][0]
    out = answer(view, None, conn["job"], conn["src_rank"], conn["dst_rank"])
    assert out is not None and set(out.to_json()) == PORT_KEYS


def test_records_round_trip_through_json(made: Decision) -> None:
    doc = json.loads(json.dumps(made.to_json()))
    assert Decision.from_json(doc) == made and Decision.from_json(doc).to_json() == doc
    view = HostView.of(made, "h4", {})
    assert HostView.from_json(json.loads(json.dumps(view.to_json()))) == view
    conn = view.connections[0]
    ans = answer(view, None, conn.job, conn.src_rank or 0, conn.dst_rank or 0)
    assert ans is not None and PortAnswer.from_json(json.loads(json.dumps(ans.to_json()))) == ans


def test_the_class_mark_is_the_one_function_s(made: Decision) -> None:
    for job in made.jobs.values():
        assert job.mark == mark_for_class(job.priority_class)
    assert made.jobs["b"].priority_class == 0 and made.jobs["b"].mark.tos == 184  # profiling: top class


def _bad(doc: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        (["format"], 2, "decision.format"),
        (["format"], "1", "decision.format"),
        (["version"], KeyError, "decision.version"),
        (["version"], 1.5, "decision.version"),
        (["jobs"], [], "decision.jobs"),
        (["jobs", "a", "class"], "1", "decision.jobs.a.class"),
        (["jobs", "a", "dscp"], 64, "decision.jobs.a.dscp"),
        (["jobs", "a", "tos"], 40, "decision.jobs.a.tos"),  # DSCP 40 written where the TOS byte belongs
        (["jobs", "a", "profiling"], "yes", "decision.jobs.a.profiling"),
        (["jobs", "a", "gpus"], "h0/gpu0", "decision.jobs.a.gpus"),
        (["connections", 0, "src_port"], 70000, "decision.connections[0].src_port"),
        (["connections", 0, "links"], [1, True], "decision.connections[0].links"),
        (["connections", 0, "share"], float("nan"), "decision.connections[0].share"),
        (["cause", "kind"], None, "decision.cause.kind"),
    ],
)
def test_a_wrong_decision_is_refused_naming_the_field(
    made: Decision, path: list[Any], value: Any, where: str
) -> None:
    doc = made.to_json()
    if path[:2] == ["jobs", "a"] and path[-1] == "tos":
        doc["jobs"]["a"]["dscp"] = 40
    with pytest.raises(InputError) as err:
        Decision.from_json(_bad(doc, path, value))
    assert err.value.where == where


def test_wrong_versions_and_types_of_a_view_and_an_answer_are_refused(made: Decision) -> None:
    view = HostView.of(made, "h0", {}).to_json()
    with pytest.raises(InputError, match="format 2 is not understood"):
        HostView.from_json({**view, "format": 2})
    with pytest.raises(InputError, match=r"host view\.host"):
        HostView.from_json({k: v for k, v in view.items() if k != "host"})
    with pytest.raises(InputError, match=r"host view\.nic_ips"):
        HostView.from_json({**view, "nic_ips": {"h0/nic0": 167772161}})
    conn = view["connections"][0]
    ans = answer(view, None, conn["job"], conn["src_rank"], conn["dst_rank"])
    assert ans is not None
    good = ans.to_json()
    for key, value, where in [
        ("api", 2, "port answer.api"),
        ("source", "guess", "port answer.source"),
        ("src_port", 0, "port answer.src_port"),
        ("tos", good["dscp"], "port answer.tos"),
        ("stale", 1, "port answer.stale"),
    ]:
        with pytest.raises(InputError) as err:
            PortAnswer.from_json({**good, key: value})
        assert err.value.where == where
    assert PortAnswer.from_json({**good, "added_later": 1}) == ans  # a new field is ignored, not refused


class _Agent(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture
def fake_agent(made: Decision) -> Iterator[tuple[str, HostView, list[dict[str, Any]]]]:
    """The agent's ``GET /v1/port`` on a Unix socket, answering from ``made``'s view of h0."""
    view = HostView.of(made, "h0", {})
    overrides: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            q = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
            out = answer(view, None, q["job"], int(q["src_rank"]), int(q["dst_rank"]))
            body = json.dumps({**(out.to_json() if out else {}), **(overrides[-1] if overrides else {})})
            self.send_response(200 if out else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: Any) -> None:
            pass

        def address_string(self) -> str:
            return "agent"

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "agent.sock")
        server = _Agent(path, Handler)
        th = threading.Thread(target=server.serve_forever, daemon=True)
        th.start()
        try:
            yield path, view, overrides
        finally:
            server.shutdown()
            server.server_close()


def test_from_decision_to_socket(fake_agent: tuple[str, HostView, list[dict[str, Any]]]) -> None:
    """Daemon decision -> host view -> agent answer -> AgentPolicy -> the byte on a real socket."""
    path, view, _ = fake_agent
    conn = view.connections[0]
    job = view.jobs[conn.job]
    policy = AgentPolicy(socket_path=path, job=conn.job)
    assert conn.src_rank is not None and conn.dst_rank is not None
    mark = policy.marking(conn.job, conn.src_rank, conn.dst_rank)
    assert (mark.source_port, mark.dscp) == (conn.src_port, job.mark.dscp)
    with socket.socket() as s:
        set_dscp(s, mark.dscp)
        assert (
            s.getsockopt(socket.IPPROTO_IP, socket.IP_TOS)
            == job.mark.tos
            == mark_for_class(job.priority_class).tos
        )
        assert get_dscp(s) == job.mark.dscp
    policy.close()


def test_the_client_ignores_an_answer_of_another_protocol(
    fake_agent: tuple[str, HostView, list[dict[str, Any]]],
) -> None:
    path, view, overrides = fake_agent
    conn = view.connections[0]
    assert conn.src_rank is not None and conn.dst_rank is not None
    overrides.append({"api": 2})
    policy = AgentPolicy(socket_path=path, job=conn.job)
    mark = policy.marking(conn.job, conn.src_rank, conn.dst_rank)
    assert (mark.source_port, mark.dscp) == (None, 0) and policy.answers == {}
    assert "dport" not in policy.query(0, 1)
    assert "dport=15202" in AgentPolicy(socket_path=path, job="j", dports=[15201, 15202]).query(0, 1)
