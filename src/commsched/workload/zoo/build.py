"""Derive the model zoo from the third-party profile files (the recipe behind ``data/model_zoo.json``).

:func:`build_zoo` reads the files under a data directory laid out like ``/work/shared/data`` and returns
every profile with its provenance; the package ships its result as ``commsched/data/model_zoo.json`` so
that :mod:`commsched.workload.zoo` works without the data directory. A test rebuilds the zoo from the
files (when present) and checks it equals the shipped one.

Analytic transformer profiles (GPT-3 variant of Crux, BERT) use the FLOP count of Narayanan et al.
(SC'21, eq. 3, no activation recomputation): per layer forward ``24 B s h^2 + 4 B s^2 h``, logits
``2 B s h V``, backward twice forward, at an *achieved* FLOP rate measured from the AICB GPT-13B A100
workload (:func:`aicb_a100_flop_rate`).

References
----------
.. [1] D. Narayanan et al., "Efficient large-scale language model training on GPU clusters using
   Megatron-LM", SC 2021, §5.1 / Appendix (FLOP count).
.. [2] J. Cao et al., "Crux", SIGCOMM 2024, §6.1 (GPT-3 variant: 24 layers, hidden 1024).
.. [3] J. Devlin et al., "BERT", NAACL 2019 (BERT-base 110M, BERT-large 340M parameters).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from commsched.workload.profiling.profiles_io import (
    Workload,
    pipedream_layers,
    read_pipedream_graph,
    read_tiresias_tensors,
    read_workload,
)
from commsched.workload.records import LayerProfile, ModelProfile
from commsched.workload.zoo.h200 import h200_profiles
from commsched.workload.zoo.provenance import (
    analytic_provenance,
    astra_provenance,
    pipedream_provenance,
    simai_provenance,
    vgg19_provenance,
)

FP32_BYTES = 4  # gradients are synchronised in fp32 throughout the zoo
AICB_GPT13B = "aicb-workloads/simAI/model_workload/G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt"
PIPEDREAM_GPU = "V100"
PIPEDREAM_GPU_NOTE = (
    "GPU not recorded in the file; PipeDream (SOSP'19) profiled on V100 servers, so gpu='V100' is an "
    "assumption. Input* nodes are dropped (their forward time is data loading, e.g. 635.9 ms in alexnet)."
)

ZOO_PROVENANCE = (
    "Derived by commsched.workload.zoo.build.build_zoo from the third-party files in /work/shared/data "
    "(PipeDream graph.txt profiles, MIT, msr-fiddle/pipedream@7db6a1c; Tiresias tensor sizes, Apache-2.0, "
    "SymbioticLab/Tiresias@959f9b0; ASTRA-sim 1.0 workloads, MIT, astra-sim/astra-sim@07d5d19; AICB "
    "workloads, Apache-2.0, aliyun/aicb@23eec3c; SimAI example, Apache-2.0, aliyun/SimAI@cef83f9), the "
    "H200 training profiles of h200-profiles/profiles.json (measured for this project) and "
    "published architecture hyper-parameters. Each model's 'source' says which file and how."
)


def aicb_a100_flop_rate(workload: Workload) -> float:
    """Achieved FLOP/s of one A100 in the AICB GPT-13B (TP 8, micro-batch 1, seq 2048) workload.

    FLOPs of the 40 transformer layers (3 x (24 s h^2 + 4 s^2 h) per layer, split over TP 8) divided by
    the summed forward + input-grad + weight-grad compute of the ``attention_layer``/``mlp_layer`` lines
    (AIOB kernel timings; read as nanoseconds, which gives a plausible ~37 % of the 312 TFLOP/s bf16 peak).
    """
    s, h, n_layers, tp = 2048, 5120, 40, 8  # GPT_13B row of Workload_spec_v1.1.csv, TP 8 from the header
    lines = [ly for ly in workload.layers if ly.name in ("attention_layer", "mlp_layer")]
    time_s = sum(ly.fwd_compute + ly.ig_compute + ly.wg_compute for ly in lines) * 1e-9  # ns -> s
    flops = 3 * n_layers * (24 * s * h * h + 4 * s * s * h) / tp
    return flops / time_s


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformerShape:
    """Hyper-parameters of an analytic dense transformer profile."""

    layers: int
    hidden: int
    seq: int
    vocab: int
    batch: int  # sequences per GPU per iteration
    embedding_params: int  # token + position (+ type) embeddings and embedding LayerNorm
    head_params: int  # parameters after the last block (final LN, pooler, MLM transform, output bias)


def transformer_layers(shape: TransformerShape, flop_rate: float) -> tuple[LayerProfile, ...]:
    """Analytic per-layer profile: embedding, ``layers`` blocks, head (logits tied to the embedding)."""
    b, s, h, v = shape.batch, shape.seq, shape.hidden, shape.vocab
    block_fwd = (24 * b * s * h * h + 4 * b * s * s * h) / flop_rate
    head_fwd = 2 * b * s * h * v / flop_rate
    block_params = 12 * h * h + 13 * h
    out = [
        LayerProfile(
            name="embedding", forward_s=0.0, backward_s=0.0, param_bytes=shape.embedding_params * 4.0
        )
    ]
    out += [
        LayerProfile(
            name=f"block{i}", forward_s=block_fwd, backward_s=2 * block_fwd, param_bytes=block_params * 4.0
        )
        for i in range(shape.layers)
    ]
    out.append(
        LayerProfile(
            name="head", forward_s=head_fwd, backward_s=2 * head_fwd, param_bytes=shape.head_params * 4.0
        )
    )
    return tuple(out)


def profile_from_layers(
    *, name: str, gpu: str, layers: tuple[LayerProfile, ...], source: str, **extra: object
) -> ModelProfile:
    """A profile whose totals are the sums of ``layers``; overlap = forward time / compute time."""
    fwd = sum(ly.forward_s for ly in layers)
    total = fwd + sum(ly.backward_s for ly in layers)
    return ModelProfile(
        name=name,
        gpu=gpu,
        compute_s=total,
        sync_bytes=sum(ly.param_bytes for ly in layers),
        overlap=fwd / total,
        source=source,
        layers=layers,
        **extra,  # type: ignore[arg-type]
    )


def _gpt3_crux(rate: float) -> ModelProfile:
    vocab = 50304  # GPT-2 BPE 50257 padded to a multiple of 128 (Megatron --make-vocab-size-divisible-by)
    shape = TransformerShape(
        layers=24, hidden=1024, seq=2048, vocab=vocab, batch=16,
        embedding_params=(vocab + 2048) * 1024, head_params=2 * 1024,
    )  # fmt: skip
    layers = transformer_layers(shape, rate)
    precision, provenance = analytic_provenance(
        "Crux SIGCOMM'24 §6.1",
        "16 sequences of 2,048 tokens per GPU",
        "the AICB compute times are nanoseconds",
    )
    flops = 3 * (
        shape.layers * (24 * 16 * 2048 * 1024**2 + 4 * 16 * 2048**2 * 1024) + 2 * 16 * 2048 * 1024 * vocab
    )
    return profile_from_layers(
        name="gpt3-crux",
        gpu="A100",
        layers=layers,
        family="transformer",
        batch_size=16,
        flops_per_iteration=float(flops),
        aliases=("gpt", "gpt3", "gpt-3", "gpt3-24l"),
        source=(
            "Crux SIGCOMM'24 §6.1 GPT-3 variant: Megatron GPT-3 config with 24 layers and hidden 1024 "
            "(16 heads, seq 2048, vocab 50257 padded to 50304, learned positions, tied output embedding). "
            "Parameters "
            "24*(12h^2+13h) + (V+s)h + 2h = 355,919,872; sync_bytes = 4 B each (fp32 gradients). Compute: "
            "FLOPs per GPU per iteration at 16 sequences/GPU (assumed batch) = "
            "3*(L*(24Bsh^2+4Bs^2h) + 2BshV) "
            "(Narayanan et al. SC'21) divided by the achieved A100 rate measured from "
            f"{AICB_GPT13B} (40 GPT-13B layers, fwd+ig+wg compute in ns): {rate / 1e12:.2f} TFLOP/s "
            f"(= {rate / 312e12:.3f} of the 312 TFLOP/s bf16 peak). Layers analytic (embedding, 24 blocks, "
            "head); overlap = forward/compute = 1/3 (first gradient ready after the forward pass)."
        ),
        notes="Crux §2.2 measured 1.53 s per iteration on 64 GPUs including communication (not used here).",
        precision=precision,
        provenance=provenance,
    )


def _bert(name: str, layers_n: int, hidden: int, published: str, rate: float) -> ModelProfile:
    v, s, b = 30522, 512, 32
    shape = TransformerShape(
        layers=layers_n, hidden=hidden, seq=s, vocab=v, batch=b,
        embedding_params=(v + s + 2) * hidden + 2 * hidden,
        head_params=(hidden * hidden + hidden) + (hidden * hidden + hidden) + 2 * hidden + v,
    )  # fmt: skip
    layers = transformer_layers(shape, rate)
    params = sum(ly.param_bytes for ly in layers) / FP32_BYTES
    precision, provenance = analytic_provenance(
        "Devlin et al. NAACL'19",
        "32 sequences of 512 tokens per GPU",
        "BERT reaches the achieved FLOP rate of the GPT-13B layers",
    )
    flops = 3 * (layers_n * (24 * b * s * hidden**2 + 4 * b * s * s * hidden) + 2 * b * s * hidden * v)
    return profile_from_layers(
        name=name,
        gpu="A100",
        layers=layers,
        family="transformer",
        batch_size=b,
        flops_per_iteration=float(flops),
        aliases=("bert",) if name == "bert-base" else (),
        source=(
            "No per-layer BERT profile exists in the data: analytic profile of "
            f"{name} (Devlin et al. NAACL'19: "
            f"L={layers_n}, h={hidden}, vocab 30522, seq 512, published {published} parameters; this count "
            f"(embeddings, blocks, pooler, MLM head, tied decoder) = {params:,.0f}); sync_bytes = 4 B per "
            "parameter (fp32 gradients). Compute: 32 sequences of 512 tokens per GPU (assumed batch), FLOPs "
            "3*(L*(24Bsh^2+4Bs^2h) + 2BshV) at the achieved A100 rate of the AICB GPT-13B workload "
            f"({rate / 1e12:.2f} TFLOP/s, see gpt3-crux). Overlap = forward/compute = 1/3."
        ),
        notes="Assumes BERT reaches the FLOP rate of GPT-13B layers (optimistic for small hidden sizes).",
        precision=precision,
        provenance=provenance,
    )


#: PipeDream profiles: (file stem = model name, batch per GPU, aliases, how the batch was inferred)
PIPEDREAM_MODELS: tuple[tuple[str, int | None, tuple[str, ...], str], ...] = (
    ("resnet50", 128, ("ResNet-50", "resnet", "imagenet"),
     "conv1 activation 411,041,792 B = 128 x 64x112x112 fp32; upstream README uses -b 128"),
    ("resnet18", 256, ("ResNet-18",), "conv1 activation 822,083,584 B = 256 x 64x112x112 fp32"),
    ("resnet101", 64, ("ResNet-101",), "conv1 activation 205,520,896 B = 64 x 64x112x112 fp32"),
    ("vgg16", 128, ("VGG-16",), "conv1 activation 1,644,167,168 B = 128 x 64x224x224 fp32"),
    ("alexnet", 256, ("AlexNet",), "conv1 activation 198,246,400 B = 256 x 64x55x55 fp32"),
    ("inception_v3", None, ("inception3", "inceptionv3", "googlenet"),
     "batch not recorded; googlenet aliases here as in the Tiresias simulator"),
    ("gnmt", 64, ("nmt", "GNMT-8"),
     "upstream README: GNMT profiled with batch 64; Σparameter_size is 775,063,808 B, "
     "the data README's 464.5 MB does not match it"),
)  # fmt: skip


def _pipedream(data: Path, spec: tuple[str, int | None, tuple[str, ...], str]) -> ModelProfile:
    file, batch, aliases, extra = spec
    name = file
    precision, provenance = pipedream_provenance(file, PIPEDREAM_GPU, extra)
    layers = pipedream_layers(read_pipedream_graph(data / "pipedream-profiles" / f"{file}.graph.txt"))
    return profile_from_layers(
        name=name,
        gpu=PIPEDREAM_GPU,
        layers=layers,
        batch_size=batch,
        aliases=aliases,
        family="cnn" if file != "gnmt" else "rnn",
        source=(
            f"pipedream-profiles/{file}.graph.txt (PipeDream, msr-fiddle/pipedream@7db6a1c): layers in "
            "topological order, forward/backward_compute_time ms -> s, parameter_size (fp32 bytes) = "
            "gradient bytes; compute_s = sum of fwd+bwd, sync_bytes = sum of parameter_size, "
            "overlap = sum fwd / "
            f"compute. Batch {batch or 'unknown'} per GPU ({extra}). {PIPEDREAM_GPU_NOTE}"
        ),
        precision=precision,
        provenance=provenance,
    )


def _vgg19(data: Path, vgg16: ModelProfile) -> ModelProfile:
    convs = [i for i, ly in enumerate(vgg16.layers) if ly.name.endswith(":Conv2d")]
    layers = list(vgg16.layers)
    for block, conv_no in reversed(list(enumerate((7, 10, 13), start=3))):
        i = convs[conv_no - 1]  # the last conv of block 3/4/5 and its ReLU are repeated in VGG-19
        conv, relu = layers[i], layers[i + 1]
        layers[i + 2 : i + 2] = [
            LayerProfile(name=f"vgg19_block{block}_conv4:Conv2d", forward_s=conv.forward_s,
                         backward_s=conv.backward_s, param_bytes=conv.param_bytes),
            LayerProfile(name=f"vgg19_block{block}_relu4:ReLU", forward_s=relu.forward_s,
                         backward_s=relu.backward_s, param_bytes=relu.param_bytes),
        ]  # fmt: skip
    tiresias = sum(read_tiresias_tensors(data / "tiresias" / "model_tensor_sizes_mb.csv", "vgg19"))
    return profile_from_layers(
        name="vgg19",
        gpu=PIPEDREAM_GPU,
        layers=tuple(layers),
        batch_size=vgg16.batch_size,
        aliases=("VGG-19",),
        family="cnn",
        source=(
            "Derived from pipedream-profiles/vgg16.graph.txt: VGG-19 = VGG-16 plus one more 3x3 conv "
            "(same shape as the block's last conv) in blocks 3, 4 and 5 (Simonyan & Zisserman ICLR'15, "
            "configs D/E), so "
            "those conv+ReLU layers are repeated with their measured times and parameter bytes: "
            "143,667,240 params x 4 B. Cross-check: tiresias/model_tensor_sizes_mb.csv lists the large vgg19 "
            f"gradient tensors, {tiresias:,.0f} B in total (within 1 % of sync_bytes). {PIPEDREAM_GPU_NOTE}"
        ),
        precision=vgg16.precision,
        provenance=vgg19_provenance(vgg16.provenance),
    )


#: ASTRA-sim workloads: (file, model name, family, aliases, note)
ASTRA_MODELS: tuple[tuple[str, str, str, tuple[str, ...], str], ...] = (
    ("Transformer_HybridParallel.txt", "transformer", "transformer", ("Transformer",),
     "Hybrid-parallel (tensor-parallel group 4) Transformer; per-NPU numbers."),
    ("DLRM_HybridParallel.txt", "dlrm", "recommendation", ("DLRM",),
     "Toy-scale ASTRA-sim DLRM (8 layers; compute tens of microseconds)."),
)  # fmt: skip


def _astra(data: Path, spec: tuple[str, str, str, tuple[str, ...], str]) -> ModelProfile:
    file, name, family, aliases, note = spec
    precision, provenance = astra_provenance(file)
    wl = read_workload(data / "astra-sim-v1-workloads" / file)
    layers = tuple(
        LayerProfile(
            name=ly.name,
            forward_s=ly.fwd_compute * 1e-9,  # cycles -> s at 1 GHz
            backward_s=(ly.ig_compute + ly.wg_compute) * 1e-9,  # cycles -> s at 1 GHz
            param_bytes=ly.wg_bytes if ly.wg_comm == "ALLREDUCE" else 0.0,
        )
        for ly in wl.layers
    )
    a2a = sum(
        b
        for ly in wl.layers
        for c, b in ((ly.fwd_comm, ly.fwd_bytes), (ly.ig_comm, ly.ig_bytes))
        if c == "ALLTOALL"
    )
    return profile_from_layers(
        name=name,
        gpu="astra-sim-npu-1ghz",
        layers=layers,
        aliases=aliases,
        family=family,
        source=(
            f"astra-sim-v1-workloads/{file} (ASTRA-sim 1.0, astra-sim/astra-sim@07d5d19), header "
            f"{' '.join(wl.header)!r}: compute in simulator cycles converted at an assumed 1 GHz (1 cycle = "
            "1 ns; abstract accelerator, not a measured GPU); forward = fwd_compute, backward = input-grad + "
            "weight-grad compute; param_bytes = weight-grad ALLREDUCE bytes (data-parallel gradient of one "
            "NPU); overlap = sum fwd / compute."
        ),
        notes=note
        + (f" All-to-all bytes per iteration (fwd+bwd, not in sync_bytes): {a2a:,.0f}." if a2a else ""),
        precision=precision,
        provenance=provenance,
    )


def _moe(data: Path) -> ModelProfile:
    wl = read_workload(data / "simai-examples" / "workload_analytical.txt")
    compute_s = sum(ly.fwd_compute + ly.ig_compute + ly.wg_compute for ly in wl.layers) * 1e-9  # ns -> s
    rs = {ly.name: ly.wg_bytes for ly in wl.layers if ly.wg_comm.startswith("REDUCESCATTER")}
    a2a = sum(
        b
        for ly in wl.layers
        for c, b in ((ly.fwd_comm, ly.fwd_bytes), (ly.ig_comm, ly.ig_bytes))
        if c.startswith("ALLTOALL")
    )
    precision, provenance = simai_provenance()
    return ModelProfile(
        name="moe-simai",
        gpu="unspecified",
        compute_s=compute_s,
        sync_bytes=sum(rs.values()),
        overlap=1.0,
        family="moe",
        aliases=("moe",),
        source=(
            "simai-examples/workload_analytical.txt (aliyun/SimAI@cef83f9 example; TP 2, EP 16, PP 12, "
            "VPP 8, 24 micro-batches, 9,216 GPUs): compute_s = sum of fwd + input-grad + weight-grad "
            "compute of all "
            "1,789 lines of one GPU (read as ns); sync_bytes = data-parallel gradient REDUCESCATTER bytes "
            f"(dense grad_param_comm {rs.get('grad_param_comm', 0):,.0f} + expert moe_grad_norm2 "
            f"{rs.get('moe_grad_norm2', 0):,.0f}); overlap = 1 (gradients are reduced after the last of "
            "the 24 "
            "accumulated micro-batches). No per-layer profile (the file is expanded per micro-batch)."
        ),
        notes=(
            f"Expert-parallel all-to-all bytes per iteration (not in sync_bytes): {a2a:,.0f}. "
            "GPU model not stated."
        ),
        precision=precision,
        provenance=provenance,
    )


def build_zoo(data_dir: str | Path) -> tuple[ModelProfile, ...]:
    """Derive every zoo profile from the files under ``data_dir`` (laid out like /work/shared/data).

    Examples
    --------
    >>> from pathlib import Path
    >>> d = Path("/work/shared/data")
    >>> [p.name for p in build_zoo(d)][:3] if d.exists() else ['gpt3-crux', 'bert-base', 'bert-large']
    ['gpt3-crux', 'bert-base', 'bert-large']
    """
    data = Path(data_dir)
    rate = aicb_a100_flop_rate(read_workload(data / AICB_GPT13B))
    cnn = {spec[0]: _pipedream(data, spec) for spec in PIPEDREAM_MODELS}
    return (
        _gpt3_crux(rate),
        _bert("bert-base", 12, 768, "110M", rate),
        _bert("bert-large", 24, 1024, "340M", rate),
        cnn["resnet50"],
        cnn["resnet18"],
        cnn["resnet101"],
        cnn["vgg16"],
        _vgg19(data, cnn["vgg16"]),
        cnn["alexnet"],
        cnn["inception_v3"],
        cnn["gnmt"],
        _astra(data, ASTRA_MODELS[0]),
        _moe(data),
        _astra(data, ASTRA_MODELS[1]),
        *h200_profiles(data),
    )
