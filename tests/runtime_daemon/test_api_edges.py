"""Rough edges of the daemon's API: strict bodies, host checks, one error shape, ``hash``, heartbeats."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from commsched.errors import InputError
from commsched.runtime.daemon import ClusterConfig, DaemonService, Store
from commsched.runtime.daemon.api import create_app
from tests.runtime_daemon.conftest import AUTH, TOKEN, FakeClock, LiveServer

CFG = ClusterConfig(topology={"kind": "crux_testbed"}, heartbeat_timeout_s=60.0, hash_name="crc32")
JSON = {**AUTH, "Content-Type": "application/json"}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "runtime-daemon.md"


@pytest.fixture
def api(tmp_path: Path, live: Callable[[Any], LiveServer]) -> Iterator[tuple[DaemonService, httpx.Client]]:
    svc = DaemonService(Store(tmp_path / "d.db"), default=CFG)
    srv = live(create_app(svc, token=TOKEN))
    with httpx.Client(base_url=srv.url, timeout=10) as client:
        yield svc, client
    srv.stop()
    svc.store.close()


def _shape(r: httpx.Response) -> dict[str, Any]:
    out = r.json()
    assert set(out) - {"detail"} == {"error", "field"}, out
    assert isinstance(out["error"], str) and out["error"] and isinstance(out["field"], str)
    return dict(out)


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ('{"name": "h0", "gpus": true}', 422, "body.gpus"),
        ('{"name": "h0", "nics": [{"id": "h0/nic0", "ip": "999.1.1.1"}]}', 422, "body.nics.0.ip"),
        ('{"name": "h0", "nics": [{"id": "h0/nic0", "ip": "10.0.0"}]}', 422, "body.nics.0.ip"),
        ('{"name": "h0", "nics": [{"id": "h0/nic0", "ip": 167772161}]}', 422, "body.nics.0.ip"),
        ('{"name": "h0", "name": "h1"}', 422, "body.name"),
        ('{"name": "h0", "nics": [{"id": "h0/nic0", "id": "h0/nic1"}]}', 422, "body.id"),
        ('{"name": "h99"}', 400, "name"),
        ('{"name": "h0", "nics": [{"id": "h0/nic9"}]}', 400, "nics[0].id"),
        ('{"name": "h0", "nics": [{"id": "h1/nic0"}]}', 400, "nics[0].id"),
        ('{"name": "h0",', 422, "body"),
        ("[1, 2]", 422, "body"),
    ],
)
def test_bad_host_registrations_are_refused_with_their_field(
    api: tuple[DaemonService, httpx.Client], body: str, code: int, field: str
) -> None:
    svc, c = api
    r = c.post("/v1/hosts", content=body, headers=JSON)
    assert r.status_code == code, r.text
    assert _shape(r)["field"] == field
    assert svc.hosts() == {}


def test_a_good_registration_keeps_its_address(api: tuple[DaemonService, httpx.Client]) -> None:
    svc, c = api
    body = {"name": "h0", "nics": [{"id": "h0/nic0", "ip": "10.0.0.1"}, {"id": "h0/nic1", "ip": "fd00::1"}]}
    assert c.post("/v1/hosts", json=body, headers=AUTH).status_code == 201
    assert [n["ip"] for n in svc.hosts()["h0"]["nics"]] == ["10.0.0.1", "fd00::1"]


def test_without_a_topology_any_host_may_register(tmp_path: Path) -> None:
    svc = DaemonService(Store(tmp_path / "d.db"), default=ClusterConfig())
    try:
        svc.register_host("anywhere", {"nics": [{"id": "anywhere/eth0", "ip": "10.9.9.9"}]})
        assert "anywhere" in svc.hosts()
    finally:
        svc.store.close()
    with pytest.raises(InputError, match="no host 'h99'"):
        DaemonService(Store(tmp_path / "e.db"), default=CFG).register_host("h99", {})


@pytest.mark.parametrize(
    "body",
    [
        '{"id": "a", "gpus": true, "model": "bert"}',
        '{"id": "a", "gpus": "8", "model": "bert"}',
        '{"id": "a", "gpus": 8.0, "model": "bert"}',
    ],
)
def test_a_gpu_count_must_be_an_integer(api: tuple[DaemonService, httpx.Client], body: str) -> None:
    svc, c = api
    r = c.post("/v1/jobs", content=body, headers=JSON)
    assert r.status_code == 422 and _shape(r)["field"] == "body.gpus"
    assert svc.version == 0


def test_duplicate_keys_are_refused_on_every_body(api: tuple[DaemonService, httpx.Client]) -> None:
    svc, c = api
    cases = [
        ("POST", "/v1/jobs", '{"id": "a", "id": "b", "hosts": ["h0"], "model": "bert"}', "body.id"),
        ("PUT", "/v1/cluster", '{"policy": "crux-full", "policy": "ecmp"}', "body.policy"),
        ("POST", "/v1/hosts/h0/counters", '{"counters": {"x": 1, "x": 2}}', "body.x"),
    ]
    for method, path, body, field in cases:
        r = c.request(method, path, content=body, headers=JSON)
        assert r.status_code == 422 and _shape(r) == {
            "error": f"body: key {field[5:]!r} is given twice in one object",
            "field": field,
        }
    assert svc.version == 0


def test_every_error_has_one_shape(api: tuple[DaemonService, httpx.Client]) -> None:
    _, c = api
    answers = [
        (c.get("/v1/nosuch"), 404, "path"),
        (c.patch("/v1/jobs", headers=AUTH), 405, "method"),
        (c.post("/v1/jobs", content="not json", headers=JSON), 422, "body"),
        (c.post("/v1/jobs", content=b"\xff\xfe", headers=JSON), 422, "body"),
        (c.post("/v1/jobs", headers=AUTH), 422, "body"),
        (c.get("/v1/decisions/latest", params={"after": "x"}), 422, "query.after"),
        (c.post("/v1/jobs", json={"id": "a"}), 401, "Authorization"),
        (c.delete("/v1/jobs/zz", headers=AUTH), 404, "job_id"),
        (c.get("/v1/decisions/99"), 404, "version"),
    ]
    for r, code, field in answers:
        assert r.status_code == code, r.text
        assert _shape(r)["field"] == field


def test_the_cluster_names_its_hash_as_the_put_takes_it(api: tuple[DaemonService, httpx.Client]) -> None:
    _, c = api
    got = c.get("/v1/cluster").json()
    assert got["hash"] == got["hash_name"] == "crc32"
    r = c.put("/v1/cluster", json={"hash": "murmur3"}, headers=AUTH)
    assert r.status_code == 200 and r.json()["cluster"]["hash"] == "murmur3"
    got = c.get("/v1/cluster").json()
    assert got["hash"] == got["hash_name"] == "murmur3"
    assert c.put("/v1/cluster", json={"hash": got["hash"]}, headers=AUTH).status_code == 200  # round trip


def test_a_silent_job_is_removed_after_the_timeout_and_kept_with_timeout_zero(tmp_path: Path) -> None:
    from commsched.runtime.daemon import JobRequest

    for timeout, kept in ((10.0, False), (0.0, True)):
        clock = FakeClock()
        cfg = ClusterConfig(topology={"kind": "crux_testbed"}, heartbeat_timeout_s=timeout)
        svc = DaemonService(Store(tmp_path / f"t{timeout}.db"), default=cfg, clock=clock)
        svc.start_job(JobRequest(id="a", hosts=("h0", "h4"), model="bert"))
        clock.t += 3600
        svc.tick()
        assert (svc.jobs() != []) is kept
        svc.store.close()


def _walk_through() -> str:
    text = DOCS.read_text()
    section = text[text.index("### A walk-through with curl") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1)


def test_the_docs_explain_the_heartbeat_timeout() -> None:
    text = DOCS.read_text()
    section = text[text.index("### A walk-through with curl") :][:2000]
    for needed in ("10 s", "--heartbeat-timeout 0", "heartbeat", "heartbeat_timeout_s"):
        assert needed in section
    assert "/heartbeat" in _walk_through()


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl on this machine")
def test_the_curl_walk_through_keeps_its_job(tmp_path: Path, live: Callable[[Any], LiveServer]) -> None:
    """The walk-through as written, on a daemon with a 2 s timeout and the pauses scaled to it."""
    cfg = ClusterConfig(topology={"kind": "crux_testbed"}, heartbeat_timeout_s=2.0)
    svc = DaemonService(Store(tmp_path / "d.db"), default=cfg)
    srv = live(create_app(svc, token=TOKEN, tick_s=0.1))
    lines = _walk_through().splitlines()
    assert lines[0].startswith("commsched daemon") and lines[1].startswith("URL=")
    script = "\n".join(lines[2:]).replace("sleep 12", "sleep 2.6").replace("sleep 3", "sleep 0.5")
    env = {**os.environ, "URL": srv.url, "AUTH": f"Authorization: Bearer {TOKEN}"}
    out = subprocess.run(
        ["bash", "-e", "-c", script],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert '"id":"bert"' in out.stdout and '"host":"h0"' in out.stdout
    kinds = [e["kind"] for e in svc.store.events(0, 100)]
    assert "heartbeat-timeout" not in kinds and kinds[-1] == "job-end"
    svc.store.close()
