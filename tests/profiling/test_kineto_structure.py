"""Kineto traces recorded without ``ProfilerStep#`` marks: iterations found from the trace's structure."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commsched.cli.app import app

torch = pytest.importorskip("torch")
nn = torch.nn


def _job() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 10))
    return model, torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))


def _record(path: Path, body: Callable[[Callable[[], None], Callable[[], None]], None]) -> int:
    """Record ``body(backward_step, optimizer_step)`` with torch.profiler (no schedule, no prof.step())."""
    from torch.profiler import ProfilerActivity, profile

    model, x, y = _job()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def fwd_bwd() -> None:
        nn.functional.cross_entropy(model(x), y).backward()

    def step() -> None:
        opt.step()
        opt.zero_grad(set_to_none=True)

    fwd_bwd()
    step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        body(fwd_bwd, step)
    prof.export_chrome_trace(str(path))
    return sum(p.numel() for p in model.parameters())


def _read(path: Path) -> tuple[int, dict[str, object], str]:
    res = CliRunner().invoke(app, ["profile", "--kineto", str(path), "--json"])
    return res.exit_code, (json.loads(res.stdout) if res.exit_code == 0 else {}), res.stderr


def _three_steps(fwd_bwd: Callable[[], None], step: Callable[[], None]) -> None:
    for _ in range(3):
        fwd_bwd()
        step()


def _three_passes(fwd_bwd: Callable[[], None], step: Callable[[], None]) -> None:
    for _ in range(3):
        fwd_bwd()


def _accumulating(fwd_bwd: Callable[[], None], step: Callable[[], None]) -> None:
    for _ in range(2):  # two backward passes per optimizer step
        fwd_bwd()
        fwd_bwd()
        step()


@pytest.mark.parametrize("body", [_three_steps, _three_passes], ids=["optimizer-steps", "backward-passes"])
def test_three_iterations_without_profiler_steps(tmp_path: Path, body: Callable[..., None]) -> None:
    params = _record(tmp_path / "t.json", body)
    rc, doc, err = _read(tmp_path / "t.json")
    assert rc == 0, err
    assert doc["sync_bytes"] == 4 * params  # one iteration's gradients, not three
    assert len(doc["gradients"]) == 4  # type: ignore[arg-type]
    assert (doc["params"], doc["precision"]) == (params, "fp32")
    assert str(doc["gpu"]).startswith("CPU")
    iters = doc["iterations"]
    assert isinstance(iters, dict) and len(iters["forward_s"]) == 3 and len(iters["backward_s"]) == 3
    assert doc["compute_s"] == pytest.approx(
        sorted(iters["forward_s"])[1] + sorted(iters["backward_s"])[1], rel=1e-9
    )


def test_gradient_accumulation_without_marks_is_refused(tmp_path: Path) -> None:
    _record(tmp_path / "acc.json", _accumulating)
    rc, _, err = _read(tmp_path / "acc.json")
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "4 backward passes for 2 optimizer steps" in lines[0], err
