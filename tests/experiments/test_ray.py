"""Sweeps spread over a local Ray cluster give the ``--workers 1`` output byte for byte (wall times aside).

The Ray runs happen in a subprocess: a Ray instance is process-wide state, and its start-up warnings
must not reach this process, where warnings are errors.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from commsched.cli.app import app

runner = CliRunner()

COMPARE = ["compare", "crux-fig19", "--policies", "ecmp-fair,crux-full", "--json"]
MICROBENCH = ["microbench", "--cases", "2", "--seed", "3", "--json"]
VCLOS = ["vclos-experiment", "vclos-table5-512", "--tasks", "12", "--policies", "vclos,ecmp", "--json"]

#: compare starts (and stops) its own local Ray; microbench and vclos-experiment then join one
#: instance started once, as a script that runs several sweeps would (one start-up instead of two)
SCRIPT = """
import json, sys
from typer.testing import CliRunner
from commsched.cli.app import app
runner = CliRunner()
out = []
def run(args):
    res = runner.invoke(app, args + ["--ray", "local"])
    out.append({"code": res.exit_code, "stdout": res.stdout, "error": repr(res.exception)})
run(json.loads(sys.argv[1]))
import ray
ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
run(json.loads(sys.argv[2]))
run(json.loads(sys.argv[3]))
ray.shutdown()
print("@@" + json.dumps(out))
"""


def _without_wall_times(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _without_wall_times(v) for k, v in obj.items() if k not in ("wall_time_s", "wall_s")}
    if isinstance(obj, list):
        return [_without_wall_times(v) for v in obj]
    return obj


def _canonical(stdout: str) -> str:
    return json.dumps(_without_wall_times(json.loads(stdout)), allow_nan=False)


def _local(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return _canonical(res.stdout)


@pytest.mark.slow
def test_ray_local_matches_one_worker_byte_for_byte() -> None:
    pytest.importorskip("ray")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(COMPARE), json.dumps(MICROBENCH), json.dumps(VCLOS)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("@@"))
    on_ray = json.loads(line[2:])
    for args, got in zip((COMPARE, MICROBENCH, VCLOS), on_ray, strict=True):
        assert got["code"] == 0, (args[0], got["error"], got["stdout"][-2000:])
        assert _canonical(got["stdout"]) == _local(args), args[0]


def test_compare_results_do_not_depend_on_workers() -> None:
    pytest.importorskip("joblib")
    assert _local([*COMPARE, "--workers", "2"]) == _local(COMPARE)


def test_ray_missing_is_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    for args in (COMPARE, MICROBENCH, VCLOS):
        res = runner.invoke(app, [*args, "--ray", "local"])
        assert res.exit_code == 2, (args[0], res.output)
        lines = [x for x in res.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and "--ray" in lines[0] and "Ray is not installed" in lines[0], lines
