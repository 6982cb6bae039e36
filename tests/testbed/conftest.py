"""Fixtures of the testbed tests: root-only tests skip with the reason; every testbed is removed."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from commsched.testbed import build, netns
from commsched.testbed.state import state_path
from commsched.topology import Topology

_counter = itertools.count()


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COMMSCHED_TESTBED_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def root() -> None:
    why = netns.missing_capability()
    if why is not None:
        pytest.skip(why)


def unique_name() -> str:
    """``cst<pid><n>``: unique per process and call, within the 16-character limit."""
    return f"cst{os.getpid() % 100000}x{next(_counter)}"


def prefix_left(name: str) -> list[str]:
    return [ns for ns in netns.list_namespaces() if ns.startswith(f"{name}-")]


@pytest.fixture
def testbed(root: None, state_dir: Path) -> Iterator[Callable[..., str]]:
    """Build testbeds by calling the fixture; every one is taken down afterwards, even on failure."""
    made: list[str] = []

    def make(topo: Topology, **kw: object) -> str:
        name = unique_name()
        made.append(name)
        build.up(topo, name=name, **kw)  # type: ignore[arg-type]
        return name

    try:
        yield make
    finally:
        for name in made:
            if state_path(name).exists():
                build.down(name)
            assert prefix_left(name) == []
