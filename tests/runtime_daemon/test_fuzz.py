"""Schemathesis fuzzes the daemon's API from its OpenAPI description: no request gets a 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402

from commsched.runtime.daemon import ClusterConfig, DaemonService, Store  # noqa: E402
from commsched.runtime.daemon.api import create_app  # noqa: E402
from tests.runtime_daemon.conftest import AUTH, TOKEN, LiveServer, serve_in_thread  # noqa: E402

CFG = ClusterConfig(topology={"kind": "crux_testbed"}, heartbeat_timeout_s=0.0, profiling_window_s=0.0)


def _openapi() -> dict[str, Any]:
    store = Store(":memory:")
    try:
        return create_app(DaemonService(store, default=CFG), token=TOKEN).openapi()
    finally:
        store.close()


schema = schemathesis.openapi.from_dict(_openapi())


@pytest.fixture(scope="module")
def fuzz_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = Path(tmp_path_factory.mktemp("fuzz")) / "d.db"
    svc = DaemonService(Store(db), default=CFG)
    srv: LiveServer = serve_in_thread(create_app(svc, token=TOKEN))
    yield srv.url
    srv.stop()
    svc.store.close()


@pytest.mark.slow
@schema.exclude(path="/v1/decisions/stream").parametrize()
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case: Any, fuzz_url: str) -> None:
    if case.query and "wait_s" in case.query:  # the long-poll waits as asked (up to 300 s): keep it short
        case.query["wait_s"] = 0.05
    for headers in (AUTH, {}):
        response = case.call(base_url=fuzz_url, headers=headers, timeout=30)
        assert response.status_code < 500, (case.method, case.path, response.status_code, response.text[:300])
