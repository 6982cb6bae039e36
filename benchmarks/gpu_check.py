"""The CUDA paths on a machine with a GPU: ``commsched profile --device cuda`` and the DDP hook.

Run from the repository root on a machine with an NVIDIA GPU and PyTorch::

    PYTHONPATH=src python benchmarks/gpu_check.py [--json]

It prints, per check, what it saw: the step profile of ``docs/examples/tiny_mlp.py:build`` in fp32 and
bf16 (``--device cuda``), that a GPU index the machine lacks exits 2 with the device count, and DDP on
CUDA with commsched's hook (:func:`commsched.runtime.torch.install`): two ranks on GPU 0 through the hook,
8 SGD steps, against one process on the full batch (the largest parameter difference; the ranks must
end identical). Exit status 1 when a check fails. CI has no GPU: there these paths run with stand-ins
(``tests/profiling/test_step_profile.py``, ``tests/real_jobs/test_staging.py``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "tiny_mlp.py"
BATCH, STEPS, LR = 64, 8, 0.05


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", "from commsched.cli.app import main; main()", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)


def profile_checks() -> dict[str, Any]:
    """The step profile on CUDA in both precisions, and a GPU index the machine lacks."""
    out: dict[str, Any] = {}
    for prec in ("fp32", "bf16"):
        res = _cli("profile", f"{EXAMPLE}:build", "--device", "cuda", "--precision", prec, "--json")
        body = json.loads(res.stdout) if res.returncode == 0 else {}
        out[prec] = {
            "exit": res.returncode,
            **{k: body.get(k) for k in ("gpu", "compute_s", "forward_s", "backward_s", "sync_bytes")},
        }
    import torch

    missing = f"cuda:{torch.cuda.device_count()}"
    res = _cli("profile", f"{EXAMPLE}:build", "--device", missing, "--json")
    out["missing_index"] = {"device": missing, "exit": res.returncode, "message": res.stderr.strip()[-200:]}
    return out


def _train(rank: int, world: int, init_file: str, out: Path) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch import nn

    torch.manual_seed(0)
    model: nn.Module = nn.Sequential(
        nn.Linear(256, 1024), nn.Tanh(), nn.Linear(1024, 512), nn.Tanh(), nn.Linear(512, 8)
    )
    g = torch.Generator().manual_seed(1)
    dev = torch.device("cuda:0")
    xs = torch.randn(STEPS, BATCH, 256, generator=g).to(dev)
    ys = torch.randn(STEPS, BATCH, 8, generator=g).to(dev)
    model = model.to(dev)
    hook, sent = None, [0]
    if world > 0:
        from commsched.runtime import Options
        from commsched.runtime.torch import install

        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.5)
        hook = install(model, job="gpu-check", options=Options(observer=lambda a, b, n: sent.append(n)))
        shard = BATCH // world
        xs, ys = xs[:, rank * shard : (rank + 1) * shard], ys[:, rank * shard : (rank + 1) * shard]
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        opt.zero_grad()
        nn.functional.mse_loss(model(xs[step]), ys[step]).backward()  # type: ignore[no-untyped-call]
        opt.step()
    torch.cuda.synchronize()
    np.savez(out / f"params-{rank}-{world}.npz", *[p.detach().cpu().numpy() for p in model.parameters()])
    (out / f"sent-{rank}-{world}.json").write_text(json.dumps(sum(sent)))
    if hook is not None:
        hook.close()
        dist.destroy_process_group()


def ddp_check() -> dict[str, Any]:
    """Two ranks on GPU 0 through the hook against one process on the full batch."""
    import numpy as np
    from torch.multiprocessing.spawn import start_processes

    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        out = Path(tmp)
        _train(0, 0, "", out)
        start_processes(_train, args=(2, str(out / "init"), out), nprocs=2, start_method="spawn")  # type: ignore[no-untyped-call]
        ref, a, b = (np.load(out / f"params-{r}-{w}.npz") for r, w in ((0, 0), (0, 2), (1, 2)))
        return {
            "max_abs_diff_vs_full_batch": max(float(np.max(np.abs(ref[k] - a[k]))) for k in ref.files),
            "ranks_identical": all(np.array_equal(a[k], b[k]) for k in a.files),
            "bytes_sent_per_rank": [json.loads((out / f"sent-{r}-2.json").read_text()) for r in (0, 1)],
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA device here (expected a machine with an NVIDIA GPU)", file=sys.stderr)
        return 2
    prof, ddp = profile_checks(), ddp_check()
    report: dict[str, Any] = {"gpu": torch.cuda.get_device_name(0), "profile": prof, "ddp_hook": ddp}
    ok = (
        prof["fp32"]["exit"] == 0
        and prof["bf16"]["exit"] == 0
        and prof["missing_index"]["exit"] == 2
        and ddp["ranks_identical"]
        and ddp["max_abs_diff_vs_full_batch"] < 1e-5
    )
    report["ok"] = ok
    print(json.dumps(report, indent=None if args.json else 2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
