"""Helpers: an in-process job (servers and worker clients on loopback threads)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from commsched.runtime.ps.client import PSClient
from commsched.runtime.ps.keys import ServerMap
from commsched.runtime.ps.server import Server
from commsched.runtime.ps.transports import TransportConfig


@contextmanager
def servers(n: int, workers: int) -> Iterator[list[Server]]:
    srv = [Server(num_workers=workers).start() for _ in range(n)]
    try:
        yield srv
    finally:
        for s in srv:
            s.stop()


def run_workers(
    srv: list[Server],
    workers: int,
    config: TransportConfig,
    body: Callable[[PSClient], Any],
    *,
    server_map: ServerMap | None = None,
    delays: dict[int, float] | None = None,
) -> dict[int, Any]:
    """Run ``body(client)`` on ``workers`` threads; re-raise the first failure."""
    out: dict[int, Any] = {}
    errors: list[BaseException] = []

    def work(rank: int) -> None:
        try:
            if delays and rank in delays:
                threading.Event().wait(delays[rank])
            with PSClient(servers=[s.address for s in srv], rank=rank, num_workers=workers, transport=config,
                          server_map=server_map) as c:  # fmt: skip
                out[rank] = body(c)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(r,)) for r in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return out


@pytest.fixture
def small_config() -> Callable[[str], TransportConfig]:
    """Transports with small parts/packets so that tests cut tensors at many boundaries."""

    def make(name: str) -> TransportConfig:
        return TransportConfig(name=name, partition_bytes=4096, credit_bytes=12_288, packet_bytes=1000)

    return make
