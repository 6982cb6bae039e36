"""Mapping of the model labels that traces use onto zoo models, with the reason for each choice.

The zoo (:mod:`commsched.workload.zoo`) has a few measured profiles; traces name many more models. Each
table below maps a trace's label (normalised: lower case, letters and digits only) to the closest zoo
model and says why. Labels absent from a table go to a documented default and are counted in the
trace's notes.

References
----------
.. [1] D. Narayanan et al., "Gavel", OSDI 2020, Table 2 (job types).
.. [2] A. Qiao et al., "Pollux", OSDI 2021, Table 1 (cifar10/ResNet18, imagenet/ResNet50, bert/BERT
   fine-tuning, ncf/NeuMF, deepspeech2, yolov3).
.. [3] J. Gu et al., "Tiresias", NSDI 2019 (TF-benchmark CNNs).
.. [4] J. Cao et al., "Crux", SIGCOMM 2024, §6.5 (GPT variants, BERT, ResNet, NMT, CTR, transformer).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from commsched.workload.zoo import normalize_model_name


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelMap:
    """Trace label -> (zoo model, reason), a default for unknown labels, and prefix rules."""

    name: str
    table: Mapping[str, tuple[str, str]]
    default: str
    prefixes: tuple[tuple[str, str], ...] = ()

    def lookup(self, label: str) -> str | None:
        """The zoo model of ``label``, or ``None`` when the label is not mapped (caller uses ``default``).

        Examples
        --------
        >>> GAVEL.lookup("LM (batch size 20)"), GAVEL.lookup("Foo")
        ('gnmt', None)
        """
        key = normalize_model_name(re.sub(r"\(.*?\)", "", label))
        if key in self.table:
            return self.table[key][0]
        for prefix, model in self.prefixes:
            if key.startswith(prefix):
                return model
        return None

    def provenance(self) -> tuple[str, ...]:
        """One line per mapping: ``label -> model: reason``."""
        lines = [f"{k} -> {m}: {why}" for k, (m, why) in self.table.items()]
        lines += [f"{p}* -> {m}: prefix rule" for p, m in self.prefixes]
        return (*lines, f"(anything else) -> {self.default}: default")


def _table(rows: dict[str, tuple[str, str]]) -> Mapping[str, tuple[str, str]]:
    return MappingProxyType({normalize_model_name(k): v for k, v in rows.items()})


GAVEL = LabelMap(
    name="gavel",
    default="resnet50",
    table=_table(
        {
            "ResNet-18": ("resnet18", "same model (CIFAR-10)"),
            "ResNet-50": ("resnet50", "same model (ImageNet)"),
            "Transformer": ("transformer", "same family (Transformer translation, Multi30k)"),
            "LM": ("gnmt", "LSTM language model (WikiText-2); gnmt is the zoo's recurrent (LSTM) model"),
            "Recommendation": ("dlrm", "autoencoder recommender (ML-20M); dlrm is the zoo's recommender"),
            "A3C": ("alexnet", "small conv net + linear layers (Atari RL); alexnet is the closest small CNN"),
            "CycleGAN": ("resnet18", "ResNet-block generator; resnet18 is the closest small residual CNN"),
        }
    ),
)

POLLUX = LabelMap(
    name="pollux",
    default="resnet50",
    table=_table(
        {
            "cifar10": ("resnet18", "Pollux trains ResNet18 on CIFAR-10"),
            "imagenet": ("resnet50", "Pollux trains ResNet50 on ImageNet"),
            "bert": ("bert-base", "Pollux fine-tunes BERT-base on SQuAD"),
            "ncf": ("dlrm", "NeuMF recommender (MovieLens); dlrm is the zoo's recommender"),
            "deepspeech2": ("gnmt", "recurrent (GRU/LSTM) speech model; gnmt is the zoo's recurrent model"),
            "yolov3": ("resnet101", "Darknet-53 backbone, comparable to ResNet-101 (YOLOv3 paper)"),
        }
    ),
)

TIRESIAS = LabelMap(
    name="tiresias",
    default="resnet50",
    table=_table(
        {
            "vgg11": ("vgg16", "VGG family; zoo has vgg16/vgg19"),
            "vgg16": ("vgg16", "same model"),
            "vgg19": ("vgg19", "same model"),
            "alexnet": ("alexnet", "same model"),
            "googlenet": ("inception_v3", "Inception family (Tiresias falls back to inception3 too)"),
            "inception3": ("inception_v3", "same model"),
            "inception4": ("inception_v3", "Inception family; zoo has inception_v3"),
            "resnet50": ("resnet50", "same model"),
            "resnet101": ("resnet101", "same model"),
            "resnet152": ("resnet101", "ResNet family; deepest zoo ResNet"),
        }
    ),
)

LINGJUN = LabelMap(
    name="lingjun",
    default="bert-base",
    table=_table(
        {
            "gpt": ("gpt3-crux", "Crux §6.5: GPT variants"),
            "llama": ("gpt3-crux", "decoder-only LLM; gpt3-crux is the zoo's LLM"),
            "65b": ("gpt3-crux", "65B LLM (LLaMA-65B)"),
            "dlm": ("gpt3-crux", "in-house large language model"),
            "multigen": ("gpt3-crux", "generative multi-modal LLM"),
            "reward": ("gpt3-crux", "RLHF reward model (LLM-sized)"),
            "bert": ("bert-base", "Crux §6.5: BERT"),
            "resnet": ("resnet50", "Crux §6.5: ResNet"),
            "image": ("resnet50", "image model; ResNet-50 stands for legacy vision jobs"),
            "dota": ("resnet50", "aerial-image detection (DOTA); CNN backbone"),
            "mnist": ("resnet18", "small CNN"),
            "nmt": ("gnmt", "Crux §6.5: NMT"),
            "ctr": ("dlrm", "Crux §6.5: in-house click-through-rate model"),
            "wordembedding": ("dlrm", "embedding-dominated model; dlrm is the zoo's embedding model"),
            "transformer": ("transformer", "Crux §6.5: in-house transformer NLP model"),
            "layerattn": ("transformer", "attention model"),
            "cognitive": ("transformer", "in-house NLP/cognition model (transformer-based)"),
        }
    ),
    prefixes=(("gpt", "gpt3-crux"), ("llama", "gpt3-crux"), ("bert", "bert-base"), ("resnet", "resnet50")),
)
