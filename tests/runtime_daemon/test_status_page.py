"""The status page, rendered by headless Chromium (skipped where Chromium is not installed)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest

from commsched.runtime.daemon import ClusterConfig, DaemonService, Store
from commsched.runtime.daemon.api import create_app
from tests.runtime_daemon.conftest import AUTH, TOKEN, LiveServer


class _Tables(HTMLParser):
    """Rows of every table by its id, cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._table = dict(attrs).get("id") or ""
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            if self._row:
                self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("headless Chromium not installed (Debian package chromium)")


def test_status_page_in_headless_chromium(tmp_path: Path, live: Callable[[Any], LiveServer]) -> None:
    browser = _chromium()
    svc = DaemonService(Store(tmp_path / "d.db"), default=ClusterConfig(topology={"kind": "crux_testbed"}))
    srv = live(create_app(svc, token=TOKEN))
    with httpx.Client(base_url=srv.url, headers=AUTH, timeout=10) as c:
        codes = [
            c.post("/v1/jobs", json={"id": "gpt", "hosts": ["h0", "h4", "h1", "h5"], "model": "gpt3-crux"}),
            c.post("/v1/jobs", json={"id": "bert-1", "hosts": ["h2", "h6"], "model": "bert-large"}),
            c.put("/v1/jobs/gpt/profile", json={"compute_s": 0.08, "comm_bytes": 1.4e9, "period_s": 0.5}),
            c.post(
                "/v1/hosts",
                json={"name": "h0", "nics": [{"id": "h0/nic0", "ip": "10.9.0.1"}], "agent": "<i>a</i>"},
            ),
        ]
        assert [r.status_code for r in codes] == [201, 201, 200, 201]
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--dump-dom",
        srv.url + "/",
    ]
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    dom = out.stdout
    assert re.search(r'<b id="version">3</b>', dom)
    parsed = _Tables()
    parsed.feed(dom)
    t = parsed.tables
    doc = svc.latest_doc()
    jobs = {row[0]: row for row in t["jobs"]}
    assert set(jobs) == {"gpt", "bert-1"}
    for jid, info in doc["jobs"].items():
        assert jobs[jid][1:4] == [str(info["rank"]), str(info["class"]), str(info["dscp"])]
    assert jobs["bert-1"][4] == "yes" and jobs["gpt"][4] == "no"  # bert still profiling: top class
    assert len(t["connections"]) == len(doc["connections"])
    first = doc["connections"][0]
    assert t["connections"][0][6] == " > ".join(first["path"][1:-1])
    assert t["connections"][0][7] == str(first["src_port"])
    assert {int(r[0]) for r in t["links"]} == {r["link"] for r in doc["link_load"]}
    assert [r[0] for r in t["history"]] == ["3", "2", "1"] and t["history"][0][2] == "profile"
    assert t["hosts"][0][:3] == ["h0", "h0/nic0=10.9.0.1", "<i>a</i>"]  # escaped: shown as text
    assert "<i>a</i>" not in dom
    shot = tmp_path / "status.png"
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={shot}",
        "--window-size=1280,2000",
        srv.url + "/",
    ]
    subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svc.store.close()
