"""Running the user's step in a child process: its own standard output and its own exit status.

``commsched profile SCRIPT.py:FUNCTION`` runs the user's code (importing the script, building the job,
the steps) in a child Python process, ``python -m commsched.runtime.profiling.step.child SPEC RESULT``, whose
standard output is the parent's standard error: a ``print()`` in the user's code cannot break ``--json``,
and a ``sys.exit()`` or ``os._exit()`` there ends the child, not the command. The child writes its
result, the profile document or the :class:`~commsched.errors.InputError` it met, to the file ``RESULT``;
a child that ends without writing it (the user's code exited, or a signal killed it) is reported as one
error line by the parent. As ``python SCRIPT.py`` does, the script's folder is the first entry of the
child's ``sys.path`` (a module target gets the working directory, as ``python -m`` does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from commsched.errors import InputError
from commsched.runtime.profiling.step import StepSpec, profile_step
from commsched.runtime.profiling.step.target import script_folder
from commsched.workload.profiling import profile_document

_EXPECTED = "a function that returns the job and a step that returns, without ending the process"


def _error(what: str, where: str, expected: str) -> dict[str, Any]:
    return {"error": {"what": what, "where": where, "expected": expected}}


def _measure(spec: StepSpec) -> dict[str, Any]:
    try:
        return {"profile": profile_document(profile_step(spec))}
    except InputError as exc:
        return _error(exc.what, exc.where, exc.expected)
    except SystemExit as exc:
        return _error(f"the user's code called sys.exit({exc.code!r})", spec.target, _EXPECTED)


def main(argv: list[str]) -> int:
    """The child's entry point: ``SPEC`` (JSON of a :class:`StepSpec`) and the ``RESULT`` file."""
    spec = StepSpec(**json.loads(argv[0]))
    folder = script_folder(spec.target)
    sys.path[0:1] = [str(folder) if folder is not None else os.getcwd()]
    result = _measure(spec)
    Path(argv[1]).write_text(json.dumps(result, allow_nan=False))
    return 0


def profile_in_child(spec: StepSpec) -> dict[str, Any]:
    """Measure ``spec`` in a child process and return its profile document.

    Raises
    ------
    InputError
        What the child met (a bad target, a failing step, ...), or a child that ended without a result.
    """
    with tempfile.TemporaryDirectory(prefix="commsched-profile-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [
            sys.executable,
            "-m",
            "commsched.runtime.profiling.step.child",
            json.dumps(asdict(spec)),
            str(out),
        ]
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=2, check=False)
        if not out.exists():
            how = (
                f"was killed by signal {-proc.returncode}"
                if proc.returncode < 0
                else f"ended with exit status {proc.returncode}"
            )
            raise InputError(f"the process running the user's code {how} before the profile was complete",
                             where=spec.target, expected=_EXPECTED)  # fmt: skip
        result = json.loads(out.read_text())
    if "error" in result:
        err = result["error"]
        raise InputError(str(err["what"]), where=str(err["where"]), expected=str(err["expected"]))
    return dict(result["profile"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
