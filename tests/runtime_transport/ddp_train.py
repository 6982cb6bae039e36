"""A plain DDP training script (CPU, gloo) with commsched's transport added in two lines.

Run as ``python ddp_train.py RANK WORLD INIT_FILE OUT_DIR``; ``WORLD = 0`` trains one process on the
full batch without DDP (the reference). Writes the final parameters and bytes sent to OUT_DIR.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

BATCH, STEPS, LR = 24, 6, 0.1


def model_and_data() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 3))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(STEPS, BATCH, 8, generator=g)
    y = torch.randn(STEPS, BATCH, 3, generator=g)
    return model, x, y


def main(rank: int, world: int, init_file: str, out: Path) -> None:
    model, xs, ys = model_and_data()
    sent = [0]
    comm = None
    if world > 0:
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
        from commsched.runtime import Options
        from commsched.runtime.torch import install

        count = Options(observer=lambda a, b, n: sent.__setitem__(0, sent[0] + n))
        comm = install(model, job="csx-ddp", options=count)
        shard = BATCH // world
        xs, ys = xs[:, rank * shard : (rank + 1) * shard], ys[:, rank * shard : (rank + 1) * shard]
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        opt.zero_grad()
        nn.functional.mse_loss(model(xs[step]), ys[step]).backward()
        opt.step()
    params = [p.detach().numpy().copy() for p in model.parameters()]
    np.savez(out / f"params-{rank}.npz", *params)
    (out / f"sent-{rank}.json").write_text(json.dumps(sent[0]))
    if comm is not None:
        comm.close()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))
