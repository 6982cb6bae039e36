"""The state file of a testbed: what was (or is about to be) created, written before each creation step.

One JSON file per testbed, ``$COMMSCHED_TESTBED_DIR/NAME.json`` (default
``$XDG_RUNTIME_DIR/commsched/testbed`` when that is set, else ``/run/commsched/testbed``). Probe
results live beside it as ``NAME.probe.json``. ``down`` trusts only this file, so it removes exactly
what ``up`` created, also after a crash halfway.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from commsched.errors import InputError

ENV_DIR = "COMMSCHED_TESTBED_DIR"
STATE_VERSION = 1


def state_dir() -> Path:
    """The directory of the state files (created on demand)."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    return Path(xdg) / "commsched" / "testbed" if xdg else Path("/run/commsched/testbed")


@dataclass(frozen=True, slots=True, kw_only=True)
class TestbedState:
    """Everything needed to rebuild, inspect and remove a testbed.

    ``topology`` holds the builder kind and its parameters (``Topology.params``), ``namespaces`` every
    namespace this testbed created or was about to create, ``phase`` the last step started.
    """

    __test__ = False  # not a pytest test class

    name: str
    topology: dict[str, Any]
    rate_scale: float
    routing: str
    seed: int
    namespaces: tuple[str, ...]
    phase: str
    pinned: tuple[dict[str, Any], ...] = ()
    version: int = STATE_VERSION
    notes: tuple[str, ...] = field(default=())

    def with_phase(self, phase: str) -> TestbedState:
        return replace(self, phase=phase)


def state_path(name: str) -> Path:
    return state_dir() / f"{name}.json"


def probe_path(name: str) -> Path:
    return state_dir() / f"{name}.probe.json"


def agents_dir(name: str) -> Path:
    """Where the host agents enforcing on testbed ``name`` list what they made (their ledgers)."""
    return state_dir() / f"{name}.agents"


def write_state(state: TestbedState) -> None:
    """Write atomically (temporary file + rename), so a crash never leaves half a file."""
    d = state_dir()
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{state.name}.json.tmp"
    data = asdict(state)
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(state_path(state.name))


def read_state(name: str) -> TestbedState:
    """The state of testbed ``name``; :class:`InputError` when there is none."""
    path = state_path(name)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(
            f"no testbed named {name!r}", where=str(path), expected="a name shown by 'commsched testbed list'"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"unreadable state file: {exc}", where=str(path)) from None
    return TestbedState(
        name=data["name"],
        topology=data["topology"],
        rate_scale=float(data["rate_scale"]),
        routing=data["routing"],
        seed=int(data["seed"]),
        namespaces=tuple(data["namespaces"]),
        phase=data["phase"],
        pinned=tuple(data.get("pinned", ())),
        version=int(data.get("version", STATE_VERSION)),
        notes=tuple(data.get("notes", ())),
    )


def remove_state(name: str) -> None:
    for p in (state_path(name), probe_path(name)):
        p.unlink(missing_ok=True)


def list_names() -> tuple[str, ...]:
    d = state_dir()
    if not d.is_dir():
        return ()
    return tuple(sorted(p.stem for p in d.glob("*.json") if not p.name.endswith(".probe.json")))
