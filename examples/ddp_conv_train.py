"""An ordinary data-parallel PyTorch training script of a small conv net over gloo: nothing in it
knows about commsched.

Run it as ``torchrun --nproc-per-node 2 examples/ddp_conv_train.py`` or as the ``command:`` of a
scenario job. Rank 0 prints one line per iteration, ``iteration I T`` (T: seconds since the first
iteration began), as ``examples/ddp_gloo_train.py`` does.

The model is a VGG-like stack for 32x32 RGB images: ``--blocks`` blocks of two 3x3 convolutions of
``--width`` channels (doubling per block) with max-pooling, and a linear classifier; its gradients
come in DDP buckets of several sizes (convolutions and the classifier), unlike the two equal layers
of the MLP example. ``--compute-s`` (a sleep per iteration) stands for a GPU's forward and backward
on a machine without one; the real forward and backward run on a batch of ``--batch`` images.
"""

import argparse
import time

import torch
import torch.distributed as dist
from torch import nn


def _net(width: int, blocks: int) -> nn.Module:
    layers: list[nn.Module] = []
    cin, c = 3, width
    for _ in range(blocks):
        layers += [nn.Conv2d(cin, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1), nn.ReLU()]
        layers.append(nn.MaxPool2d(2))
        cin, c = c, 2 * c
    side = 32 >> blocks
    layers += [nn.Flatten(), nn.Linear(cin * side * side, 10)]
    return nn.Sequential(*layers)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--compute-s", type=float, default=0.1)
    ap.add_argument("--batch", type=int, default=4)
    args = ap.parse_args()

    dist.init_process_group("gloo")  # env:// rendezvous: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank = dist.get_rank()
    torch.manual_seed(0)
    ddp = nn.parallel.DistributedDataParallel(_net(args.width, args.blocks))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, 3, 32, 32, generator=gen)
    y = torch.randint(0, 10, (args.batch,), generator=gen)
    t0 = time.time()
    for i in range(args.iterations):
        opt.zero_grad()
        time.sleep(args.compute_s)
        loss = nn.functional.cross_entropy(ddp(x), y)
        loss.backward()  # DDP all-reduces the gradient buckets here
        opt.step()
        if rank == 0:
            print(f"iteration {i} {time.time() - t0:.4f} loss {loss.item():.5f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
