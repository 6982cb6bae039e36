"""``python -m commsched.experiments.ps emulate SPEC | sink ... | source ...``: the bench's processes.

* ``emulate SPEC.json``: an emulated training worker (:mod:`commsched.experiments.ps.emulate`) of the
  job the environment names (:mod:`commsched.runtime.ps.roles`); prints JSON.
* ``sink HOST FLOWS DURATION`` / ``source HOST PORT DURATION [BIND]``: raw TCP goodput probe
  (:mod:`commsched.experiments.ps.probe`).

The job's scheduler and servers are the runtime's (``python -m commsched.runtime.ps``). Errors print
one line on stderr and exit 1 (2 for bad input).
"""

from __future__ import annotations

import json
import socket
import sys
from dataclasses import asdict

from commsched.errors import CommschedError, InputError
from commsched.runtime.ps.errors import error_exit_code


def _emulate(path: str) -> None:
    from commsched.experiments.ps.emulate import EmulatedLayer, run_emulation
    from commsched.runtime.ps.launch import start_worker
    from commsched.runtime.ps.roles import role_from_env

    with open(path, encoding="utf-8") as fh:
        spec = json.load(fh)
    env = role_from_env()
    worker = start_worker(env)
    try:
        layers = [EmulatedLayer(**ly) for ly in spec["layers"]]
        res = run_emulation(
            worker.client, layers, iterations=int(spec["iterations"]), warmup=int(spec.get("warmup", 1)),
            seed=int(spec.get("seed", 0)), timeout_s=env.timeout_s,
        )  # fmt: skip
    finally:
        worker.close()
    print(json.dumps(asdict(res)))


def _sink(argv: list[str]) -> None:
    from commsched.experiments.ps.probe import sink

    listener = socket.create_server((argv[0], 0))
    print(listener.getsockname()[1], flush=True)
    print(json.dumps({"goodput_bps": sink(listener, flows=int(argv[1]), duration_s=float(argv[2]))}))


def _source(argv: list[str]) -> None:
    from commsched.experiments.ps.probe import source

    source((argv[0], int(argv[1])), duration_s=float(argv[2]), bind=argv[3] if len(argv) == 4 else None)


def _run(argv: list[str]) -> None:
    if argv[:1] == ["emulate"] and len(argv) == 2:
        _emulate(argv[1])
    elif argv[:1] == ["sink"] and len(argv) == 4:
        _sink(argv[1:])
    elif argv[:1] == ["source"] and len(argv) in (4, 5):
        _source(argv[1:])
    else:
        expected = "emulate SPEC | sink HOST FLOWS DURATION | source HOST PORT DURATION [BIND]"
        raise InputError(" ".join(argv) or "nothing", where="arguments", expected=expected)


def main(argv: list[str]) -> int:
    try:
        _run(argv)
    except CommschedError as exc:
        return error_exit_code(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
