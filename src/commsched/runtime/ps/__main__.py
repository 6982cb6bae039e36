"""``python -m commsched.runtime.ps role | scheduler HOST``: the processes a job is made of.

* ``role``: run the scheduler or server named by the environment (:mod:`commsched.runtime.ps.roles`).
* ``scheduler HOST``: the scheduler on an ephemeral port of ``HOST`` (the port is printed first).

Workers are the job's own program (:class:`~commsched.runtime.ps.client.PSClient`); the emulated
workers and goodput probes of the PS experiments are ``python -m commsched.experiments.ps``.
Errors print one line on stderr and exit 1 (2 for bad input).
"""

from __future__ import annotations

import socket
import sys

from commsched.errors import InputError
from commsched.runtime.ps.errors import process_exit_code


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
        else:
            raise InputError(" ".join(argv) or "nothing", where="arguments", expected="role | scheduler HOST")

    return process_exit_code(run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
