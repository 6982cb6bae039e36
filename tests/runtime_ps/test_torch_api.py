"""The PyTorch API: DistributedOptimizer on 2-4 workers trains to the same parameters as one process."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from commsched.runtime.ps.client import PSClient
from commsched.runtime.ps.transports import TransportConfig
from tests.runtime_ps.conftest import servers

torch = pytest.importorskip("torch")
bps = pytest.importorskip("commsched.runtime.ps.torch")

STEPS = 5
BATCH = 24


def _model(seed: int) -> Any:
    """The small model with parameters drawn from a generator of its own.

    The worker threads of one test build their models concurrently: seeding torch's process-wide
    generator here (``torch.manual_seed``) let one thread's draws interleave with another's, so the
    root sometimes started from a mixture of two seeds' parameters and broadcast those.
    """
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for p in model.parameters():  # uniform in [-0.4, 0.4), close to Linear's default scale
            p.copy_((torch.rand(p.shape, generator=g) - 0.5) * 0.8)
    return model


def _data() -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(7)
    return torch.randn(STEPS, BATCH, 6, generator=g), torch.randn(STEPS, BATCH, 3, generator=g)


def _train(model: Any, opt: Any, xs: Any, ys: Any) -> None:
    for x, y in zip(xs, ys, strict=True):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def _single() -> list[Any]:
    model = _model(0)
    xs, ys = _data()
    _train(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), xs, ys)
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize(
    ("workers", "transport"),
    [(2, "fifo"), (3, "mercury"), (4, "bytescheduler")],
)
def test_distributed_optimizer_matches_one_process(workers: int, transport: str) -> None:
    want = _single()
    xs, ys = _data()
    shard = BATCH // workers
    out: dict[int, list[Any]] = {}
    errors: list[BaseException] = []
    cfg = TransportConfig(name=transport, partition_bytes=256, credit_bytes=512, packet_bytes=64)

    def work(rank: int, address: tuple[str, int]) -> None:
        try:
            with PSClient(servers=[address], rank=rank, num_workers=workers, transport=cfg) as c:
                ctx = bps.PSContext(c, timeout_s=60)
                model = _model(100 + rank)  # different init: broadcast_parameters must fix it
                opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                bps.broadcast_parameters(model.state_dict(), root_rank=0, context=ctx)
                opt = bps.DistributedOptimizer(opt, named_parameters=model.named_parameters(), context=ctx)
                bps.broadcast_optimizer_state(opt, root_rank=0, context=ctx)
                lo = rank * shard
                _train(model, opt, xs[:, lo : lo + shard], ys[:, lo : lo + shard])
                out[rank] = [p.detach().clone() for p in model.parameters()]
                assert {e["cat"] for e in bps.timeline(ctx)} == {"queue", "transfer"}
        except BaseException as exc:
            errors.append(exc)

    with servers(1, workers) as srv:
        # broadcast_parameters must reach the root's init: seed 100 is rank 0's, not the single run's 0
        ts = [threading.Thread(target=work, args=(r, srv[0].address)) for r in range(workers)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
    assert not errors, errors[0]
    root_init = _model(100)
    single = _model(0)
    single.load_state_dict(root_init.state_dict())
    _train(single, torch.optim.SGD(single.parameters(), lr=0.1, momentum=0.9), *_data())
    for r in range(workers):
        for got, ref in zip(out[r], single.parameters(), strict=True):
            torch.testing.assert_close(got, ref.detach(), rtol=1e-5, atol=1e-6)
    assert any(not torch.equal(a, b) for a, b in zip(want, out[0], strict=True))  # the init mattered


def test_model_init_ignores_the_process_wide_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: another thread drawing from torch's global generator must not change a worker's init.

    Every ``Linear`` draws from the global generator once more before its own initialisation, as a
    concurrently starting worker thread does; the models must come out the same as undisturbed.
    """
    quiet = [p.detach().clone() for p in _model(100).parameters()]
    plain = torch.nn.Linear.reset_parameters

    def disturbed(self: Any) -> None:
        torch.rand(3)  # the other thread's draw
        plain(self)

    monkeypatch.setattr(torch.nn.Linear, "reset_parameters", disturbed)
    noisy = [p.detach().clone() for p in _model(100).parameters()]
    assert all(torch.equal(a, b) for a, b in zip(quiet, noisy, strict=True))
    assert not torch.equal(quiet[0], next(_model(101).parameters()).detach())  # the seed matters


def test_priorities_follow_layer_position() -> None:
    captured: list[tuple[str, int]] = []

    class Recorder:
        num_workers, rank = 1, 0

        def declare(self, name: str) -> int:
            return 0

        def push_pull_async(
            self, array: Any, *, name: str, priority: int, average: bool, out: Any = None
        ) -> Any:
            captured.append((name, priority))
            raise RuntimeError("recorded")

    model = _model(0)
    ctx = bps.PSContext(Recorder(), timeout_s=1)  # type: ignore[arg-type]
    opt = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), context=ctx)  # fmt: skip
    with pytest.raises(RuntimeError, match="recorded"):
        torch.nn.functional.mse_loss(model(torch.ones(2, 6)), torch.zeros(2, 3)).backward()
    assert ("Gradient.2.bias", 1) in captured  # the last layer's gradient comes first, priority 1
    assert opt is not None


@pytest.mark.slow
def test_init_from_dmlc_env_with_launch(tmp_path: Path) -> None:
    """``commsched ps launch --local-workers 2 CMD``: init() reads DMLC_* and push_pull sums."""
    script = tmp_path / "job.py"
    script.write_text(
        "import torch, commsched.runtime.ps.torch as bps\n"
        "bps.init()\n"
        "t = bps.push_pull(torch.full((5,), float(bps.rank() + 1)), average=False, name='x')\n"
        "assert t.tolist() == [3.0] * 5, t\n"
        "assert bps.size() == 2\n"
        "bps.shutdown()\n"
    )
    cs = Path(sys.executable).with_name("commsched")
    argv = [str(cs), "ps", "launch", "--local-workers", "2", sys.executable, str(script)]
    res = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert res.returncode == 0, res.stderr
