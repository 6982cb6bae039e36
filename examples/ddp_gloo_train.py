"""An ordinary data-parallel PyTorch training script over gloo: nothing in it knows about commsched.

Run it as ``torchrun --nproc-per-node 2 examples/ddp_gloo_train.py`` or as the ``command:`` of a
scenario job (``commsched testbed run`` gives every rank torchrun's environment: RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT, ...). Rank 0 prints one line per iteration, ``iteration I T`` (T: seconds
since the first iteration began), which a scenario can name as the job's own log
(``iteration_log: 'iteration \\d+ ([0-9.]+)'``).

Arguments: ``--dim`` (width of the two-layer model: ``2 * (dim * dim + dim)`` parameters, that many
float32 gradients all-reduced per iteration), ``--iterations``, ``--compute-s`` (a sleep per
iteration that stands for a GPU's forward and backward on a machine without one), ``--batch``.
"""

import argparse
import time

import torch
import torch.distributed as dist
from torch import nn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--compute-s", type=float, default=0.1)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()

    dist.init_process_group("gloo")  # env:// rendezvous: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(args.dim, args.dim), nn.ReLU(), nn.Linear(args.dim, args.dim))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, args.dim, generator=gen)
    y = torch.randn(args.batch, args.dim, generator=gen)
    t0 = time.time()
    for i in range(args.iterations):
        opt.zero_grad()
        time.sleep(args.compute_s)
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()  # DDP all-reduces the gradient buckets here
        opt.step()
        if rank == 0:
            print(f"iteration {i} {time.time() - t0:.4f} loss {loss.item():.5f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
