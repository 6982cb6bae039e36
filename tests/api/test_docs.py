"""Documentation: the tutorial runs, the generated references match the code, the site builds."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from commsched._docgen import JOB_FIELDS, SCENARIO_FIELDS, cli_reference, scenario_reference
from commsched.io.scenario import JobEntry, ScenarioFile

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


def test_the_tutorial_runs() -> None:
    blocks = _python_blocks(DOCS / "tutorial-policy.md")
    assert len(blocks) >= 5
    namespace: dict[str, object] = {"__name__": "tutorial"}
    for block in blocks:
        exec(compile(block, "tutorial-policy.md", "exec"), namespace)
    assert namespace["report"].ok  # type: ignore[attr-defined]


def test_the_getting_started_page_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The page's Python prints what it says: the utilisation ``simulate --json`` reports, one line per
    job of the scenario, and crux-full ahead of ecmp-fair; its YAML is the shipped example file."""
    import ast
    import json

    import yaml
    from typer.testing import CliRunner

    from commsched.cli.app import app

    page = (DOCS / "index.md").read_text(encoding="utf-8")
    blocks = _python_blocks(DOCS / "index.md")
    assert len(blocks) == 1
    namespace: dict[str, object] = {"__name__": "index"}
    exec(compile(blocks[0], "index.md", "exec"), namespace)
    lines = capsys.readouterr().out.splitlines()

    res = CliRunner().invoke(app, ["simulate", "crux-fig19", "--policy", "crux-full", "--json"])
    assert res.exit_code == 0, res.stderr
    assert lines[0] == f"GPU utilisation {json.loads(res.stdout)['gpu_utilization']:.3f}"  # "the same figure"
    sc = namespace["sc"]
    jobs = [(str(j.spec.id), j.spec.gpus) for j in sc.jobs]  # type: ignore[attr-defined]
    rows = [ln.split() for ln in lines[1:-1]]
    assert [(r[0], int(r[1])) for r in rows] == jobs
    assert all(float(r[2]) >= 1.0 for r in rows)  # a slow-down: contended / standalone
    utils = ast.literal_eval(lines[-1])  # the printed dict
    assert list(utils) == ["ecmp-fair", "crux-full"] and utils["crux-full"] > utils["ecmp-fair"]

    shown = yaml.safe_load(re.findall(r"```yaml\n(.*?)```", page, re.S)[0])
    assert shown == yaml.safe_load((REPO / "examples" / "crux-example1.yaml").read_text(encoding="utf-8"))
    cmds = re.findall(r"^commsched (simulate examples/\S+|compare crux-fig19 \S+ \S+)", page, re.M)
    assert len(cmds) == 2
    for cmd in cmds:
        res = CliRunner().invoke(app, [*cmd.split(), "--mode", "fast"])
        assert res.exit_code == 0 and "GPU util" in res.stdout, (cmd, res.output)


def _documented_fields(page: str, heading: str) -> list[str]:
    section = page.split(heading, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(\w+)` \|", section, re.M)


def test_scenario_reference_lists_exactly_the_fields_the_validator_accepts() -> None:
    page = scenario_reference()
    assert _documented_fields(page, "## Top level") == list(ScenarioFile.model_fields)
    assert _documented_fields(page, "## `jobs[]`") == list(JobEntry.model_fields)
    # and every field has a meaning written for it
    assert set(SCENARIO_FIELDS) == set(ScenarioFile.model_fields)
    assert set(JOB_FIELDS) == set(JobEntry.model_fields)


def test_scenario_reference_lists_every_topology_kind_and_trace_kind() -> None:
    from commsched.io.traces import trace_kinds
    from commsched.topology.builders import builder_parameters, topology_builders

    page = scenario_reference()
    for kind in topology_builders().names():
        line = next(ln for ln in page.splitlines() if ln.startswith(f"- **`{kind}`**"))
        assert all(f"`{p}`" in line for p in builder_parameters(kind)), kind
    for kind in trace_kinds():
        assert f"- **`{kind}`**" in page


def test_cli_reference_lists_every_command_and_option() -> None:
    import typer

    from commsched.cli.app import app

    page = cli_reference()
    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        assert f"## `commsched {name}`" in page
        for p in cmd.params:
            for flag in getattr(p, "opts", []):
                if flag.startswith("-"):
                    assert f"`{flag}`" in page, (name, flag)


@pytest.mark.slow
def test_mkdocs_builds_without_warnings(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    if mkdocs is None:
        pytest.skip("no mkdocs command beside the interpreter")
    proc = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "WARNING" not in proc.stderr
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "load_scenario" in api and "check_policy" in api
    assert (tmp_path / "site" / "reference" / "scenario" / "index.html").is_file()
    assert (tmp_path / "site" / "simulator" / "index.html").is_file()
