"""``commsched profile SCRIPT:FUNCTION`` on the CPU: the tutorial's example, both forms, bad targets."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from commsched.cli.app import app
from tests.paths import REPO

torch = pytest.importorskip("torch")

EXAMPLE = REPO / "docs" / "examples" / "tiny_mlp.py"
FAST = ["--warmup", "1", "--iterations", "3"]
#: the example's parameters from its layer sizes: Linear 256-512, 512-512, LayerNorm 512, Linear 512-10
EXAMPLE_PARAMS = (256 * 512 + 512) + (512 * 512 + 512) + 2 * 512 + (512 * 10 + 10)


def _profile(*args: str) -> dict[str, Any]:
    res = CliRunner().invoke(app, ["profile", *args, *FAST, "--json"])
    assert res.exit_code == 0, res.output
    return dict(json.loads(res.stdout))


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("example") / "tiny.json"
    doc = _profile(f"{EXAMPLE}:build", "--device", "cpu", "--out", str(out))
    return doc, out


def test_example_profile_holds_what_the_zoo_needs(example: tuple[dict[str, Any], Path]) -> None:
    doc, _ = example
    assert {"compute_s", "forward_s", "backward_s", "sync_bytes", "layers", "source"} <= doc.keys()
    assert doc["sync_bytes"] == 4 * EXAMPLE_PARAMS and doc["params"] == EXAMPLE_PARAMS
    assert math.isclose(doc["compute_s"], doc["forward_s"] + doc["backward_s"], rel_tol=1e-9)
    names = [g["name"] for g in doc["gradients"]]  # every parameter tensor exactly once
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.LayerNorm(512), torch.nn.Linear(512, 10),
    )  # fmt: skip
    assert sorted(names) == sorted(n for n, _ in model.named_parameters())
    assert sum(g["bytes"] for g in doc["gradients"]) == doc["sync_bytes"]
    ready = [g["ready_s"] for g in doc["gradients"]]
    assert ready == sorted(ready) and all(r >= 0 for r in ready)
    assert [ly["name"] for ly in doc["layers"]] == ["0", "2", "4", "5"]
    for key, total in (
        ("forward_s", "forward_s"),
        ("backward_s", "backward_s"),
        ("param_bytes", "sync_bytes"),
    ):
        assert math.isclose(sum(ly[key] for ly in doc["layers"]), doc[total], rel_tol=1e-9)
    assert len(doc["iterations"]["forward_s"]) == 3


def test_example_provenance(example: tuple[dict[str, Any], Path]) -> None:
    v = example[0]["provenance"]
    assert (v["device"], v["precision"], v["batch_size"], v["torch"]) == (
        "cpu",
        "fp32",
        64,
        torch.__version__,
    )
    assert (v["warmup"], v["iterations"]) == (1, 3)
    assert abs(dt.datetime.fromisoformat(v["date"]) - dt.datetime.now(dt.UTC)) < dt.timedelta(hours=1)
    assert example[0]["gpu"].startswith("CPU") and example[0]["name"] == "tiny_mlp.build"


def test_example_profile_file_simulates_in_a_scenario(example: tuple[dict[str, Any], Path]) -> None:
    import commsched as cs

    doc, out = example
    written = json.loads(out.read_text())
    assert written["sync_bytes"] == doc["sync_bytes"] and written["format"] == "commsched-profile"
    scenario = out.parent / "s.yaml"
    scenario.write_text(
        "topology: {kind: single_link, capacity_bps: 1.0e9}\nhorizon_s: 2\n"
        "jobs:\n  - {id: mine, gpus: 4, model: {profile: tiny.json}}\n"
        "  - {id: zoo, gpus: 4, model: resnet50@h200}\n"
    )
    sc = cs.load_scenario(scenario)
    assert sc.jobs[0].spec.profile.sync_bytes == 4 * EXAMPLE_PARAMS and sc.jobs[0].spec.profile.layers
    result = cs.simulate(sc, policy="fair")
    assert result.jobs[0].iterations > 0
    res = CliRunner().invoke(app, ["intrajob", str(out), "--bandwidth-gbps", "10", "--json"])
    assert res.exit_code == 0, res.output


def test_step_form_in_bf16(tmp_path: Path) -> None:
    doc = _profile(f"{EXAMPLE}:build_step", "--precision", "bf16", "--batch-size", "64", "--name", "mlp")
    assert (doc["name"], doc["precision"], doc["batch_size"]) == ("mlp", "bf16", 64)
    assert doc["sync_bytes"] == 4 * EXAMPLE_PARAMS  # autocast keeps fp32 parameters and gradients
    assert len(doc["gradients"]) == 8 and doc["forward_s"] > 0 and doc["backward_s"] > 0


TIED = """
import torch
from torch import nn

class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.out = nn.Linear(16, 100, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, x):
        return self.out(self.emb(x))

def build():
    return Tied(), (torch.randint(0, 100, (8, 4)), torch.randint(0, 100, (8, 4))), (
        lambda out, y: nn.functional.cross_entropy(out.reshape(-1, 100), y.reshape(-1)))
"""


def test_tied_weights_count_once(tmp_path: Path) -> None:
    (tmp_path / "tied.py").write_text(TIED)
    doc = _profile(f"{tmp_path / 'tied.py'}:build")
    assert [g["name"] for g in doc["gradients"]] == ["emb.weight"] and doc["sync_bytes"] == 4 * 100 * 16
    # the output layer uses the embedding's weight: no parameter of its own, its time joins the embedding's
    assert [(ly["name"], ly["param_bytes"]) for ly in doc["layers"]] == [("emb", 6400.0)]


BAD = {
    "raises.py": "def build():\n    raise RuntimeError('no data here')\n",
    "wrong.py": "def build():\n    return 3\n",
    "nobackward.py": (
        "import torch\nfrom torch import nn\n\ndef build():\n    m = nn.Linear(2, 2)\n"
        "    return m, lambda: m(torch.ones(1, 2))\n"
    ),
    "badstep.py": (
        "import torch\nfrom torch import nn\n\ndef build():\n    m = nn.Linear(2, 2)\n"
        "    return m, (torch.ones(1, 3), torch.ones(1, 2)), nn.functional.mse_loss\n"
    ),
    "syntax.py": "def build(:\n",
}


@pytest.mark.parametrize(
    ("target", "needle"),
    [
        ("missing.py:build", "no such file"),
        ("raises.py:build", "building the job failed: RuntimeError: no data here"),
        ("wrong.py:build", "the function returned int"),
        ("wrong.py:nothere", "no function 'nothere'"),
        ("nobackward.py:build", "no gradient was accumulated"),
        ("badstep.py:build", "the training step failed: RuntimeError"),
        ("syntax.py:build", "running syntax.py failed: SyntaxError"),
        ("nocolon", "FILE.py:FUNCTION"),
        ("no_such_module_xyz:build", "cannot import"),
    ],
)
def test_bad_targets_are_one_line(tmp_path: Path, target: str, needle: str) -> None:
    for name, text in BAD.items():
        (tmp_path / name).write_text(text)
    out = tmp_path / "out.json"
    path = str(tmp_path / target) if ".py" in target else target
    res = CliRunner().invoke(app, ["profile", path, *FAST, "--out", str(out)])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], res.stderr
    assert "Traceback" not in res.output and not out.exists()
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".out")]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--precision", "fp16"], "fp32 or bf16"),
        (["--device", "tpu"], "cpu, cuda or cuda:N"),
        (["--iterations", "0"], "--warmup/--iterations"),
    ],
)
def test_bad_options(args: list[str], needle: str) -> None:
    res = CliRunner().invoke(app, ["profile", f"{EXAMPLE}:build", *args])
    assert res.exit_code == 2 and needle in res.stderr, res.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_a_clear_error() -> None:
    res = CliRunner().invoke(app, ["profile", f"{EXAMPLE}:build", "--device", "cuda"])
    assert res.exit_code == 2 and "CUDA is not available" in res.stderr


@pytest.mark.parametrize("device", ["cuda:1", "cuda:x", "cuda:-1"])
def test_a_gpu_index_the_machine_does_not_have_is_a_clear_error(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an H100 machine ``--device cuda:7`` ended the user's code with a CUDA error and the message blamed
    the user's function; the index is checked against the machine's devices first (one here), before
    the user's code is loaded."""
    from commsched.errors import InputError
    from commsched.runtime.profiling.step import StepSpec, profile_step

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(InputError) as err:
        profile_step(StepSpec(target=f"{EXAMPLE}:build", device=device))
    assert "1 CUDA device(s)" in str(err.value) and "cuda:0 .. cuda:0" in str(err.value)


class _FakeEvent:
    """Stands in for ``torch.cuda.Event`` on a machine without a GPU: records the host clock."""

    recorded = 0

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.t: float | None = None

    def record(self) -> None:
        import time

        self.t = time.perf_counter()
        _FakeEvent.recorded += 1

    def elapsed_time(self, end: _FakeEvent) -> float:
        assert self.t is not None and end.t is not None
        return (end.t - self.t) * 1e3  # milliseconds, as CUDA events give them


CPU_STEP = """
import torch
from torch import nn

def build(device):
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))  # stays on the CPU
    x = torch.randn(4, 8)
    return model, lambda: model(x).sum().backward()
"""


def test_the_cuda_path_runs_with_events_where_cpu_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--device cuda`` marks with CUDA events and reads them after a synchronisation. Without a GPU the
    events are replaced by host-clock stand-ins, so that the code path (marks in the hooks, one
    synchronisation per iteration, milliseconds to seconds) runs; the model stays on the CPU."""
    from commsched.runtime.profiling.step import StepSpec, profile_step

    syncs: list[int] = []
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: syncs.append(1))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Stand-in GPU")
    (tmp_path / "cpu_step.py").write_text(CPU_STEP)
    _FakeEvent.recorded = 0
    p = profile_step(
        StepSpec(target=f"{tmp_path / 'cpu_step.py'}:build", device="cuda", warmup=1, iterations=3)
    )
    assert (p.provenance.device, p.provenance.device_name) == ("cuda", "Stand-in GPU")
    assert len(syncs) == 1 + 3 + 3  # one per iteration: warm-up, timed, instrumented (3)
    # per iteration: start, forward end, 4 gradients; an instrumented one adds a mark per layer's first use
    assert _FakeEvent.recorded == 7 * 6 + 3 * 2
    assert p.forward_s > 0 and p.backward_s > 0 and p.sync_bytes == 4 * (8 * 16 + 16 + 16 * 4 + 4)
    assert [ly.name for ly in p.layers] == ["0", "2"]
