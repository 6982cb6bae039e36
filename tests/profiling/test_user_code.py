"""The user's code runs in a child process: its exits, prints and imports cannot take over the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commsched.cli.app import app

pytest.importorskip("torch")

FAST = ["--warmup", "1", "--iterations", "2"]
SCRIPT = """
import os
import sys

import torch
from torch import nn

import beside  # a module in the script's own folder, as `python script.py` would find it


def _job():
    torch.manual_seed(0)
    return nn.Linear(4, beside.OUT), (torch.randn(8, 4), torch.randn(8, beside.OUT)), nn.functional.mse_loss


def exits0():
    sys.exit(0)


def exits3():
    sys.exit(3)


def hard_exit():
    os._exit(0)


def exits_in_step():
    model = nn.Linear(4, 2)
    return model, lambda: sys.exit(0)


def chatty():
    print("building the model now")
    print("{not json")
    return _job()


def quiet():
    return _job()
"""


@pytest.fixture
def script(tmp_path: Path) -> Path:
    (tmp_path / "beside.py").write_text("OUT = 2\n")
    path = tmp_path / "job.py"
    path.write_text(SCRIPT)
    return path


@pytest.mark.parametrize(
    ("function", "needle"),
    [
        ("exits0", "called sys.exit(0)"),
        ("exits3", "called sys.exit(3)"),
        ("hard_exit", "ended with exit status 0"),
        ("exits_in_step", "called sys.exit(0)"),
    ],
)
def test_an_exit_in_the_users_code_is_one_line_exit_2(script: Path, function: str, needle: str) -> None:
    out = script.parent / "out" / "p.json"
    out.parent.mkdir()
    res = CliRunner().invoke(app, ["profile", f"{script}:{function}", *FAST, "--out", str(out), "--json"])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], res.stderr
    assert res.stdout == "" and os.listdir(out.parent) == []


def test_a_print_in_the_build_function_leaves_json_one_object(script: Path) -> None:
    """Run as a user would (a real process): stdout is exactly the profile, the print goes to stderr."""
    cli = Path(sys.executable).parent / "commsched"
    res = subprocess.run(
        [str(cli), "profile", f"{script}:chatty", *FAST, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["format"] == "commsched-profile" and doc["sync_bytes"] == 4 * (4 * 2 + 2)
    assert "building the model now" in res.stderr


def test_the_scripts_folder_is_on_the_path(script: Path) -> None:
    res = CliRunner().invoke(app, ["profile", f"{script}:quiet", *FAST, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["params"] == 4 * 2 + 2
