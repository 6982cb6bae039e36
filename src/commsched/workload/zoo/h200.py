"""The H200 entries of the model zoo: training profiles measured on one NVIDIA H200, fp32 and bf16.

``h200-profiles/profiles.json`` (see its README) holds, for nine models and two precisions, the medians
of 8 timed iterations (CUDA events) of forward and backward time and one instrumented iteration: the
forward time of every leaf module with parameters and the gradient-ready timeline of every parameter
tensor. :func:`h200_profiles` turns each (model, precision) into a zoo profile named
``MODEL@h200-PRECISION`` after the zoo's own name of the model (``resnet50@h200-bf16``,
``gpt3-crux@h200-fp32``); ``MODEL@h200`` is an alias of the bf16 entry (mixed precision is how these
models train on an H200). The per-layer profile comes from
:func:`commsched.workload.profiling.timeline.layers_from_timeline`, scaled to the medians, so that
``compute_s`` is the median forward plus the median backward time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from commsched.workload.profiling.records import GradientReady
from commsched.workload.profiling.timeline import ModuleTime, layers_from_timeline
from commsched.workload.records import ModelProfile, ProfileProvenance

H200_FILE = "h200-profiles/profiles.json"
#: (key in profiles.json, the zoo's name of the model, family)
H200_MODELS: tuple[tuple[str, str, str], ...] = (
    ("gpt3-24l-1024", "gpt3-crux", "transformer"),
    ("bert-base", "bert-base", "transformer"),
    ("bert-large", "bert-large", "transformer"),
    ("resnet50", "resnet50", "cnn"),
    ("resnet18", "resnet18", "cnn"),
    ("resnet101", "resnet101", "cnn"),
    ("vgg16", "vgg16", "cnn"),
    ("alexnet", "alexnet", "cnn"),
    ("inception_v3", "inception_v3", "cnn"),
)
#: precision key in profiles.json -> the zoo's precision name
H200_PRECISIONS: tuple[tuple[str, str], ...] = (("bf16-autocast", "bf16"), ("fp32", "fp32"))


def _shape(shape: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in shape.items())


def _entry(doc: dict[str, Any], key: str, zoo_name: str, family: str, prec: tuple[str, str]) -> ModelProfile:
    model = doc["models"][key]
    run = model[prec[0]]
    layers_doc = run["layers"]
    modules = [
        ModuleTime(name=m["module"], forward_s=m["forward_s"]) for m in layers_doc["layers_forward_order"]
    ]
    grads = [
        GradientReady(name=g["param"], size_bytes=float(g["bytes_fp32"]), ready_s=g["ready_s"])
        for g in layers_doc["gradients_ready_order"]
    ]
    fwd, bwd = float(run["forward_s"]), float(run["backward_s"])
    layers = layers_from_timeline(modules, grads, forward_s=fwd, backward_s=bwd)
    gpu = str(doc["gpu"])
    what = "bf16 autocast" if prec[1] == "bf16" else "fp32 (TF32 matmul off, cuDNN TF32 on)"
    return ModelProfile(
        name=f"{zoo_name}@h200-{prec[1]}",
        gpu=gpu,
        compute_s=fwd + bwd,
        sync_bytes=float(sum(g.size_bytes for g in grads)),
        overlap=fwd / (fwd + bwd),
        source=(
            f"{H200_FILE} (measured 2026-11-26 on one {gpu}, PyTorch {doc['torch']}; model {key}, "
            f"{_shape(model['shape'])}, {model['params']:,} parameters in {model['param_tensors']} tensors), "
            f"{what}: forward {fwd:.4f} s and backward {bwd:.4f} s per iteration, medians of "
            f"{len(run['forward_all'])} timed iterations after 3 warm-ups (CUDA events; the file's median "
            f"of forward + backward is {run['compute_s']:.4f} s); sync_bytes = fp32 gradient bytes of every "
            f"parameter tensor; layers: {len(modules)} leaf modules with parameters (forward hooks) and the "
            f"gradient-ready timeline of {len(grads)} tensors (register_post_accumulate_grad_hook) of one "
            "instrumented iteration, scaled to the medians (commsched.workload.profiling.timeline)."
        ),
        family=family,
        batch_size=int(model["shape"]["batch"]),
        layers=layers,
        aliases=(f"{zoo_name}@h200",) if prec[1] == "bf16" else (),
        notes="Random weights and inputs; one run on one GPU (timings of one GPU, not a benchmark of H200s).",
        precision=prec[1],
        provenance=ProfileProvenance(
            kind="measured",
            reference=f"{H200_FILE} (measured for this project on one {gpu}, PyTorch {doc['torch']})",
            assumptions=("random weights and inputs; one run on one GPU",),
        ),
    )


def h200_profiles(data_dir: str | Path) -> tuple[ModelProfile, ...]:
    """Every H200 profile of ``data_dir/h200-profiles/profiles.json``: per model, bf16 then fp32.

    Examples
    --------
    >>> d = Path("/work/shared/data")
    >>> names = [p.name for p in h200_profiles(d)] if d.exists() else ["gpt3-crux@h200-bf16"]
    >>> names[0]
    'gpt3-crux@h200-bf16'
    """
    doc = json.loads((Path(data_dir) / H200_FILE).read_text())
    return tuple(
        _entry(doc, key, zoo_name, family, prec)
        for key, zoo_name, family in H200_MODELS
        for prec in H200_PRECISIONS
    )
