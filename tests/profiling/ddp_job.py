"""A two-rank data-parallel job over gloo on the CPU that records one iteration with PyTorch's own tools.

Run as ``python ddp_job.py RANK WORLD STORE_FILE OUT_DIR`` (one process per rank). After two iterations
(DDP rebuilds its gradient buckets after the first), one iteration is recorded at once by
``torch.profiler.ExecutionTraceObserver`` (``et<RANK>.json``) and ``torch.profiler.profile``
(``kineto<RANK>.json``, shapes recorded). ``job<RANK>.json`` holds what DDP itself reports: the sizes of its
rebuilt gradient buckets (bytes), the parameter count and the parameter tensors.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile


def main(rank: int, world: int, store: str, out: Path) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))

    def step() -> None:
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()

    for _ in range(2):
        step()
    et = ExecutionTraceObserver()
    et.register_callback(str(out / f"et{rank}.json"))
    et.start()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    et.stop()
    et.unregister_callback()
    prof.export_chrome_trace(str(out / f"kineto{rank}.json"))
    logged = ddp._get_ddp_logging_data()
    report = {
        "buckets": [int(b) for b in str(logged["rebuilt_bucket_sizes"]).split(",")],
        "params": sum(p.numel() for p in model.parameters()),
        "param_tensors": len(list(model.parameters())),
    }
    (out / f"job{rank}.json").write_text(json.dumps(report))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))
