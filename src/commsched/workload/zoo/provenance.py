"""Precision and structured provenance of the zoo entries derived by :mod:`commsched.workload.zoo.build`.

Each function returns what one source supports: the precision (one of
:data:`commsched.workload.records.PRECISIONS`) and a :class:`~commsched.workload.records.ProfileProvenance`
whose ``assumptions`` name what was assumed rather than read. The prose of every entry stays in its
``source`` text.
"""

from __future__ import annotations

from commsched.workload.records import ProfileProvenance

AICB_REF = (
    "aicb-workloads/simAI/model_workload/G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt "
    "(aliyun/aicb@23eec3c)"
)
#: what the analytic profiles assume about arithmetic (the AICB file does not record its own)
ANALYTIC_PRECISION = (
    "gradients fp32 (4 B per parameter); compute precision not recorded: the achieved FLOP rate is the "
    "AICB workload's, whose file does not state the arithmetic it ran in"
)
PIPEDREAM_REF = "msr-fiddle/pipedream@7db6a1c"
#: PipeDream profiles whose batch note reads conv1's activation bytes as fp32 (4 B per element)
PIPEDREAM_FP32 = ("resnet50", "resnet18", "resnet101", "vgg16", "alexnet")
UNRECORDED = "the file records neither the compute precision nor the element type of its bytes"


def analytic_provenance(paper: str, batch: str, *extra: str) -> tuple[str, ProfileProvenance]:
    """An analytic transformer profile: FLOPs of ``paper``'s shape at the AICB A100 rate.

    Examples
    --------
    >>> analytic_provenance("Devlin et al. NAACL'19", "32 sequences of 512 tokens per GPU")[0]
    'fp32-grads'
    """
    ref = f"{paper}; Narayanan et al. SC'21 (FLOP count); {AICB_REF}"
    assumptions = (batch, *extra, ANALYTIC_PRECISION)
    return "fp32-grads", ProfileProvenance(kind="analytic", reference=ref, assumptions=assumptions)


def pipedream_provenance(file: str, gpu: str, batch_note: str) -> tuple[str, ProfileProvenance]:
    """A PipeDream graph profile measured on an unrecorded GPU (``gpu`` assumed).

    Examples
    --------
    >>> [pipedream_provenance(f, "V100", "")[0] for f in ("resnet50", "gnmt")]
    ['fp32', 'fp32-grads']
    """
    if file in PIPEDREAM_FP32:
        prec, why = (
            "fp32",
            (
                "compute fp32: conv1's activation bytes are 4 B per element at the batch (resnet50 at the "
                "upstream README's batch 128; for the others batch and element size are read together)"
            ),
        )
    else:
        prec, why = "fp32-grads", "compute precision not recorded by the file (parameter_size is fp32 bytes)"
    ref = f"pipedream-profiles/{file}.graph.txt ({PIPEDREAM_REF})"
    assumptions = (f"gpu {gpu} (not recorded in the file)", f"batch: {batch_note}", why)
    return prec, ProfileProvenance(kind="measured", reference=ref, assumptions=assumptions)


def vgg19_provenance(vgg16: ProfileProvenance | None) -> ProfileProvenance:
    """VGG-19 derived from the measured VGG-16 profile by architecture (``vgg16``'s assumptions kept)."""
    return ProfileProvenance(
        kind="derived",
        reference=(
            f"pipedream-profiles/vgg16.graph.txt ({PIPEDREAM_REF}); Simonyan & Zisserman ICLR'15 "
            "configs D/E; cross-check tiresias/model_tensor_sizes_mb.csv (SymbioticLab/Tiresias@959f9b0)"
        ),
        assumptions=(
            "each extra conv+ReLU costs what the block's last measured conv+ReLU costs",
            *(vgg16.assumptions if vgg16 else ()),
        ),
    )


def astra_provenance(file: str) -> tuple[str, ProfileProvenance]:
    """An ASTRA-sim 1.0 workload file (abstract accelerator, cycles)."""
    return "unrecorded", ProfileProvenance(
        kind="simulator-workload",
        reference=f"astra-sim-v1-workloads/{file} (astra-sim/astra-sim@07d5d19)",
        assumptions=("compute cycles read at 1 GHz (abstract accelerator, not a measured GPU)", UNRECORDED),
    )


def simai_provenance() -> tuple[str, ProfileProvenance]:
    """The SimAI analytical MoE workload example."""
    return "unrecorded", ProfileProvenance(
        kind="simulator-workload",
        reference="simai-examples/workload_analytical.txt (aliyun/SimAI@cef83f9)",
        assumptions=("compute times read as nanoseconds", "GPU model not stated", UNRECORDED),
    )
