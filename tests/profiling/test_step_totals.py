"""Measured steps whose numbers add up: layers from parameter use, ready times, left-out parameters,
the spread of the timed iterations, names and provenance."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from commsched.cli.app import app
from tests.paths import SHARED_DATA

torch = pytest.importorskip("torch")
from commsched.runtime.profiling.step import StepSpec, profile_step  # noqa: E402

D = 32  # model width of the attention model

MODELS = f"""
import time

import torch
from torch import nn


class Enc(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, {D})
        layer = nn.TransformerEncoderLayer({D}, 4, dim_feedforward=64, batch_first=True, dropout=0.0)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear({D}, 10)

    def forward(self, t):
        return self.head(self.enc(self.emb(t)).mean(dim=1))


def attn():
    torch.manual_seed(0)
    return Enc(), (torch.randint(0, 100, (8, 16)), torch.randint(0, 10, (8,))), nn.functional.cross_entropy


class LeftOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.frozen = nn.Linear(8, 8)
        self.unused = nn.Linear(8, 8)
        self.b = nn.Linear(8, 2)
        self.frozen.requires_grad_(False)

    def forward(self, x):
        return self.b(self.frozen(self.a(x)))


def left_out():
    torch.manual_seed(0)
    return LeftOut(), (torch.randn(4, 8), torch.randn(4, 2)), nn.functional.mse_loss


def _sleepy(pauses):
    model = nn.Linear(4, 2)
    calls = iter(pauses)

    def step():
        time.sleep(next(calls))
        model(torch.ones(3, 4)).sum().backward()

    return model, step


def noisy():
    return _sleepy([0.01, 0.2, 0.01] + [0.01] * 3)  # 3 timed iterations, then 3 instrumented ones


def steady():
    return _sleepy([0.05] * 8)
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "models.py"
    path.write_text(MODELS)
    return path


def _profile(models: Path, fn: str, **kw: Any) -> Any:
    opts = {"warmup": 1, "iterations": 3} | kw
    return profile_step(StepSpec(target=f"{models}:{fn}", **opts))


def test_attention_layers_in_forward_order_with_times(models: Path) -> None:
    """``nn.MultiheadAttention`` uses its projections' weights without calling their ``forward``: the layer
    order and times come from when the parameters are used."""
    p = _profile(models, "attn")
    block = ["self_attn", "norm1", "linear1", "linear2", "norm2"]  # post-norm TransformerEncoderLayer order
    expected = ["emb", *(f"enc.layers.{i}.{m}" for i in (0, 1) for m in block), "head"]
    assert [ly.name for ly in p.layers] == expected
    assert all(ly.forward_s > 0 and ly.backward_s > 0 for ly in p.layers)
    attn_bytes = 4 * (3 * D * D + 3 * D + D * D + D)  # in_proj (q, k, v) and out_proj, weights and biases
    assert [ly.param_bytes for ly in p.layers][1] == attn_bytes
    assert math.isclose(sum(ly.forward_s for ly in p.layers), p.forward_s, rel_tol=1e-9)
    assert math.isclose(sum(ly.backward_s for ly in p.layers), p.backward_s, rel_tol=1e-9)
    assert sum(ly.param_bytes for ly in p.layers) == p.sync_bytes


def test_ready_times_are_scaled_like_the_layers(models: Path) -> None:
    p = _profile(models, "attn")
    ready = [g.ready_s for g in p.gradients]
    assert ready == sorted(ready) and math.isclose(ready[-1], p.backward_s, rel_tol=1e-9)


def test_unused_and_frozen_parameters_are_reported_not_synchronised(models: Path) -> None:
    p = _profile(models, "left_out")
    assert p.sync_bytes == 4 * ((8 * 8 + 8) + (8 * 2 + 2))  # a and b only
    assert p.params == (8 * 8 + 8) + (8 * 2 + 2)
    assert p.unused_params == ("unused.weight", "unused.bias")
    assert p.frozen_params == ("frozen.weight", "frozen.bias")
    assert sorted(g.name for g in p.gradients) == ["a.bias", "a.weight", "b.bias", "b.weight"]
    assert sum(ly.param_bytes for ly in p.layers) == p.sync_bytes
    left = [w for w in p.warnings if "parameter tensor(s)" in w]  # (a spread warning may come too)
    assert len(left) == 2 and "unused.weight" in left[0] and "frozen.weight" in left[1]


def test_noisy_iterations_carry_a_warning_and_their_spread(models: Path) -> None:
    noisy = _profile(models, "noisy", warmup=0)
    assert noisy.spread is not None and noisy.spread > 5  # 0.01 s, 0.2 s, 0.01 s: (0.2 - 0.01) / 0.01 ~ 19
    assert any("spread" in w for w in noisy.warnings)
    steady = _profile(models, "steady", warmup=0)
    assert steady.spread is not None and steady.spread < 0.5 and steady.warnings == ()


def test_two_functions_of_one_file_get_two_names(models: Path) -> None:
    names = {_profile(models, fn, warmup=0, iterations=1).name for fn in ("attn", "left_out")}
    assert names == {"models.attn", "models.left_out"}


def test_an_empty_name_is_refused() -> None:
    res = CliRunner().invoke(app, ["profile", "x.py:f", "--name", "", "--json"])
    assert res.exit_code == 2 and "--name" in res.stderr


def test_a_batch_size_that_contradicts_the_batch_is_refused(models: Path) -> None:
    with pytest.raises(Exception, match="--batch-size 64, but the batch has 4 samples"):
        _profile(models, "left_out", batch_size=64)
    assert _profile(models, "left_out", batch_size=4).provenance.batch_size == 4


H200 = SHARED_DATA / "h200-profiles"
needs_data = pytest.mark.skipif(not H200.exists(), reason="shared data folder not present")


def _floats(x: Any) -> list[float]:
    if isinstance(x, float):
        return [x]
    if isinstance(x, dict):
        return [f for v in x.values() for f in _floats(v)]
    if isinstance(x, list):
        return [f for v in x for f in _floats(v)]
    return []


@needs_data
def test_kineto_profile_file_is_rounded_and_carries_its_provenance(tmp_path: Path) -> None:
    out = tmp_path / "r50.json"
    res = CliRunner().invoke(
        app, ["profile", "--kineto", str(H200 / "trace-resnet50.json.gz"), "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    floats = _floats(doc)
    assert floats and all(
        f == float(f"{f:.12g}") for f in floats
    )  # 12 significant digits, as the README says
    assert any(f != float(f"{f:.10g}") for f in floats)  # and not fewer
    ref = json.loads((H200 / "profiles.json").read_text())["models"]["resnet50"]
    assert (doc["precision"], doc["params"]) == (
        "bf16",
        ref["params"],
    )  # the H200 traces ran under bf16 autocast
    assert "H200" in doc["gpu"]


def test_the_models_table_never_cuts_a_name() -> None:
    res = CliRunner().invoke(app, ["models"], env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    cells = [ln.split("│")[1] for ln in res.stdout.splitlines() if ln.startswith("│")]
    assert cells and not any("…" in c for c in cells)
    assert "inception_v3@h200-bf" in res.stdout  # folded onto the next line, not cut
