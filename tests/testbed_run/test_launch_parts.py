"""The launcher's process owner and a PS process's exit status (no root, no network: local processes)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from commsched.errors import InputError, TestbedError
from commsched.runtime.launch.procs import Processes
from commsched.runtime.ps.errors import PSError, error_exit_code


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_first_line_then_the_rest_of_stdout_at_exit(tmp_path: Path) -> None:
    """The port a process prints first, then its result: nothing read twice, nothing lost."""
    procs = Processes(tmp_path)
    try:
        code = "import sys, time; print(4242, flush=True); time.sleep(0.3); print('{\"x\": 1}'); print('end')"
        procs.start("sink", _py(code), capture_stdout=True)
        assert procs.first_line("sink", 10.0) == "4242"
        assert procs.output("sink", 10.0) == '{"x": 1}\nend\n'
        assert procs.procs["sink"].returncode == 0
    finally:
        procs.close()


def test_two_lines_in_one_read_keep_the_second_for_the_output(tmp_path: Path) -> None:
    procs = Processes(tmp_path)
    try:
        procs.start("p", _py("print('1'); print('2')"), capture_stdout=True)
        time.sleep(0.5)  # both lines are in the pipe before the first is asked for
        assert procs.first_line("p", 10.0) == "1"
        assert procs.output("p", 10.0) == "2\n"
    finally:
        procs.close()


def test_a_silent_process_gives_no_line_and_a_running_one_no_output(tmp_path: Path) -> None:
    procs = Processes(tmp_path)
    try:
        procs.start("quiet", _py("import time; time.sleep(30)"), capture_stdout=True)
        t0 = time.monotonic()
        assert procs.first_line("quiet", 0.5) is None
        assert procs.output("quiet", 0.3) is None
        assert time.monotonic() - t0 < 5.0
    finally:
        procs.close()
    assert procs.procs["quiet"].poll() is not None  # stopped by close


def test_announced_address_and_environment(tmp_path: Path) -> None:
    procs = Processes(tmp_path)
    try:
        code = "import os; print('starting'); print('listening on ' + os.environ['HQ_ADDR'], flush=True)"
        procs.start("daemon", _py(code), capture_stdout=True, env={"HQ_ADDR": "unix:/x.sock"})
        assert procs.announced("daemon", 10.0) == "unix:/x.sock"
        procs.start("dead", _py("import sys; sys.stderr.write('boom\\n')"), capture_stdout=True)
        with pytest.raises(TestbedError, match="dead did not start: boom"):
            procs.announced("dead", 10.0)
    finally:
        procs.close()


def test_without_a_log_directory_stderr_is_inherited(capfd: pytest.CaptureFixture[str]) -> None:
    procs = Processes(None)
    try:
        procs.start("p", _py("import sys; sys.stderr.write('to the parent\\n')"))
        assert procs.wait_all(["p"], 10.0) == {"p": 0}
    finally:
        procs.close()
    assert "to the parent" in capfd.readouterr().err
    with pytest.raises(TestbedError):
        procs.directory()


def test_error_exit_code_prints_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert error_exit_code(InputError("spam", where="arguments", expected="eggs")) == 2
    assert error_exit_code(PSError("a peer vanished")) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: arguments: spam") and "eggs" in err[0]
    assert err[1] == "error: a peer vanished"
