"""``python -m commsched.runtime.ps ROLE|emulate SPEC|sink|source``: the processes a job is made of.

* ``role``: run the scheduler or server named by the environment (:mod:`commsched.runtime.ps.roles`).
* ``scheduler HOST``: the scheduler on an ephemeral port of ``HOST`` (the port is printed first).
* ``emulate SPEC.json``: an emulated training worker (:mod:`commsched.runtime.ps.emulate`); prints JSON.
* ``sink HOST FLOWS DURATION`` / ``source HOST PORT DURATION [BIND]``: raw TCP goodput probe.

Errors print one line on stderr and exit 1 (2 for bad input).
"""

from __future__ import annotations

import json
import socket
import sys
from dataclasses import asdict

from commsched.errors import InputError
from commsched.runtime.ps.errors import process_exit_code


def _emulate(path: str) -> None:
    from commsched.runtime.ps.emulate import EmulatedLayer, run_emulation
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


def main(argv: list[str]) -> int:
    def run() -> None:
        if argv[:1] == ["role"]:
            from commsched.runtime.ps.launch import run_role
            from commsched.runtime.ps.roles import role_from_env

            run_role(role_from_env())
        elif argv[:1] == ["scheduler"] and len(argv) == 2:
            from commsched.runtime.ps.rendezvous import serve_scheduler
            from commsched.runtime.ps.roles import role_from_env

            env = role_from_env()
            listener = socket.create_server((argv[1], env.root[1]))
            print(listener.getsockname()[1], flush=True)
            with listener:
                serve_scheduler(listener, num_servers=env.num_servers, num_workers=env.num_workers,
                                timeout_s=env.timeout_s)  # fmt: skip
        elif argv[:1] == ["emulate"] and len(argv) == 2:
            _emulate(argv[1])
        elif argv[:1] == ["sink"] and len(argv) == 4:
            from commsched.runtime.ps.probe import sink

            listener = socket.create_server((argv[1], 0))
            print(listener.getsockname()[1], flush=True)
            print(json.dumps({"goodput_bps": sink(listener, flows=int(argv[2]), duration_s=float(argv[3]))}))
        elif argv[:1] == ["source"] and len(argv) in (4, 5):
            from commsched.runtime.ps.probe import source

            source(
                (argv[1], int(argv[2])), duration_s=float(argv[3]), bind=argv[4] if len(argv) == 5 else None
            )
        else:
            raise InputError(
                " ".join(argv) or "nothing", where="arguments", expected="role | emulate SPEC | sink | source"
            )

    return process_exit_code(run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
