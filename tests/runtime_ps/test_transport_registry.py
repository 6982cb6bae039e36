"""The PS transports are one registry: names, descriptions and behaviour in one record each."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from commsched.errors import UnknownNameError
from commsched.experiments.ps.predict import transport_policy
from commsched.runtime.ps.transports import (
    SendQueue,
    TransportConfig,
    TransportKind,
    register_transport,
    transport_registry,
)


def test_a_name_registered_twice_raises() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_transport(TransportKind(name="mercury", description="again"))


def test_an_unknown_transport_lists_the_known_ones() -> None:
    with pytest.raises(UnknownNameError, match="expected one of bytescheduler, fifo, mercury, p3"):
        TransportConfig(name="nope")


def test_every_transport_has_a_description_and_its_defaults() -> None:
    reg = transport_registry()
    for name in reg.names():
        kind = reg.get(name)
        assert kind.name == name and kind.description
        cfg = TransportConfig.named(name)
        assert cfg.kind is kind
        assert cfg.partition_bytes == (kind.partition_bytes or TransportConfig().partition_bytes)


def test_the_cli_lists_the_registry() -> None:
    from commsched.cli.app import app

    res = CliRunner().invoke(app, ["ps", "transports", "--json"])
    assert res.exit_code == 0, res.output
    listed = json.loads(res.stdout)
    assert list(listed) == list(transport_registry().names())
    assert listed["bytescheduler"]["credit"] is True and listed["mercury"]["packets"] is True


def test_a_new_transport_is_one_registration() -> None:
    """In a fresh process (the registry is per process): a registered kind runs the queue and the model."""
    code = """
from commsched.experiments.ps.predict import transport_policy
from commsched.runtime.ps.transports import SendQueue, TransportConfig, TransportKind, register_transport
register_transport(TransportKind(name="credit-fifo", description="ready order within a credit",
                                 prioritized=False, credit=True))
q = SendQueue(TransportConfig(name="credit-fifo", partition_bytes=8, credit_bytes=8))
q.add(tensor=1, size=16, priority=5)
q.add(tensor=0, size=8, priority=0)
first = q.pop()
assert (first.tensor, q.ready()) == (1, False), (first, q.ready())  # ready order, credit used up
transport_policy(TransportConfig(name="credit-fifo"))
print("ok")
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr


@pytest.mark.parametrize(
    ("name", "order"),
    [("fifo", [1, 1, 0]), ("p3", [0, 1, 1]), ("mercury", [0, 1, 1]), ("bytescheduler", [0, 1, 1])],
)
def test_each_kind_orders_its_queue(name: str, order: list[int]) -> None:
    cfg = TransportConfig(name=name, partition_bytes=8, packet_bytes=8, credit_bytes=1 << 20)
    q = SendQueue(cfg)
    q.add(tensor=1, size=16, priority=5)
    q.add(tensor=0, size=8, priority=0)
    assert [q.pop().tensor for _ in range(3)] == order
    assert transport_policy(cfg) is not None
