"""A tiny training job for ``commsched profile`` (the tutorial's example; CI profiles it on the CPU).

``build`` returns ``(model, batch, loss_fn)``: commsched moves the model and the batch to the device, runs
``loss_fn(model(inputs), targets)`` and its backward pass, and times both. ``build_step`` shows the other
form, ``(model, step)``, where the step is your own code.

    commsched profile docs/examples/tiny_mlp.py:build --device cpu --out tiny.json
"""

import torch
from torch import nn


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(256, 512),
        nn.ReLU(),
        nn.Linear(512, 512),
        nn.ReLU(),
        nn.LayerNorm(512),
        nn.Linear(512, 10),
    )


def build(batch: int = 64):
    """The model, one batch of random data (inputs, labels) and the loss."""
    x = torch.randn(batch, 256)
    y = torch.randint(0, 10, (batch,))
    return _model(), (x, y), nn.functional.cross_entropy


def build_step(device: str = "cpu", batch: int = 64):
    """The same job as ``(model, step)``: the step runs forward and backward (no optimizer step)."""
    model = _model().to(device)
    x = torch.randn(batch, 256, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step() -> None:
        nn.functional.cross_entropy(model(x), y).backward()

    return model, step
