"""The model zoo: named :class:`~commsched.workload.records.ModelProfile` records with provenance.

The profiles ship as package data (``commsched/data/model_zoo.json``, derived from third-party profile
files by :func:`commsched.workload.zoo.build.build_zoo`; see ``commsched/data/README.md``). Names are
matched case-insensitively and ignoring punctuation, and through the aliases that traces use, so
``"ResNet-50"``, ``"resnet50"`` and ``"imagenet"`` all give the same profile.

The layer helpers (:func:`forward_s`, :func:`backward_s`, :func:`layer_bytes`, :func:`backward_order`)
feed the per-layer iteration-time models (WFBP, ByteScheduler, Mercury).

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §6 (models of the evaluation: GPT, BERT, ResNet ...).
.. [2] Y. Peng et al., "A generic communication scheduler for distributed DNN training acceleration"
   (ByteScheduler), SOSP 2019 (per-layer gradient tensors in backward order).
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources

from commsched.errors import UnknownNameError
from commsched.workload.profiling.profiles_io import zoo_from_json_doc
from commsched.workload.records import LayerProfile, ModelProfile

ZOO_RESOURCE = "model_zoo.json"


def normalize_model_name(name: str) -> str:
    """Lower-case ``name`` and drop everything but letters and digits.

    Examples
    --------
    >>> normalize_model_name("ResNet-50"), normalize_model_name("inception_v3")
    ('resnet50', 'inceptionv3')
    """
    return re.sub(r"[^a-z0-9]", "", name.lower())


@cache
def _zoo() -> tuple[ModelProfile, ...]:
    """The shipped zoo (read once per process; immutable, so caching cannot leak state)."""
    text = resources.files("commsched").joinpath("data", ZOO_RESOURCE).read_text()
    return zoo_from_json_doc(json.loads(text), where=f"commsched/data/{ZOO_RESOURCE}")


@cache
def _index() -> dict[str, ModelProfile]:
    out: dict[str, ModelProfile] = {}
    for p in _zoo():
        for key in (p.name, *p.aliases):
            k = normalize_model_name(key)
            if k in out and out[k].name != p.name:
                raise RuntimeError(f"model alias {key!r} is ambiguous ({out[k].name}, {p.name})")
            out[k] = p
    return out


def list_models() -> tuple[ModelProfile, ...]:
    """Every profile of the zoo, in zoo order.

    Examples
    --------
    >>> [p.name for p in list_models()][:3]
    ['gpt3-crux', 'bert-base', 'bert-large']
    """
    return _zoo()


def model_names(*, aliases: bool = False) -> tuple[str, ...]:
    """Canonical model names (and, with ``aliases=True``, every alias too).

    Examples
    --------
    >>> "vgg19" in model_names()
    True
    """
    if not aliases:
        return tuple(p.name for p in _zoo())
    return tuple(n for p in _zoo() for n in (p.name, *p.aliases))


def get_model(name: str, *, where: str = "model") -> ModelProfile:
    """The profile named ``name`` (case, ``-``/``_`` and spaces ignored; aliases accepted).

    Raises
    ------
    UnknownNameError
        No model or alias matches; the message lists the valid names.

    Examples
    --------
    >>> get_model("ResNet-50").name
    'resnet50'
    >>> get_model("gpt").layers[1].name
    'block0'
    >>> get_model("lenet")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    commsched.errors.UnknownNameError: model: unknown model 'lenet' (expected one of ...)
    """
    try:
        return _index()[normalize_model_name(name)]
    except KeyError:
        raise UnknownNameError("model", name, model_names(aliases=True), where=where) from None


def forward_s(profile: ModelProfile) -> float:
    """Total forward time of the per-layer profile (0 when the profile has no layers).

    Examples
    --------
    >>> p = get_model("vgg16")
    >>> round(forward_s(p) / p.compute_s, 3) == round(p.overlap, 3)
    True
    """
    return sum(ly.forward_s for ly in profile.layers)


def backward_s(profile: ModelProfile) -> float:
    """Total backward time of the per-layer profile (0 when the profile has no layers)."""
    return sum(ly.backward_s for ly in profile.layers)


def layer_bytes(profile: ModelProfile) -> tuple[float, ...]:
    """Gradient bytes of each layer in forward order.

    Examples
    --------
    >>> sum(layer_bytes(get_model("resnet50"))) == get_model("resnet50").sync_bytes
    True
    """
    return tuple(ly.param_bytes for ly in profile.layers)


def backward_order(profile: ModelProfile, *, with_params_only: bool = False) -> tuple[LayerProfile, ...]:
    """Layers in the order their gradients become ready (reverse forward order).

    With ``with_params_only=True`` layers without parameters are left out.

    Examples
    --------
    >>> backward_order(get_model("alexnet"), with_params_only=True)[0].name
    'node23:Linear'
    """
    layers = tuple(reversed(profile.layers))
    return tuple(ly for ly in layers if ly.param_bytes > 0) if with_params_only else layers


def gradient_ready_times(profile: ModelProfile) -> tuple[float, ...]:
    """Time (from iteration start) at which each layer's gradient is ready, in backward order.

    The forward pass runs first; the gradient of a layer is ready when its backward computation ends.

    Examples
    --------
    >>> p = get_model("gpt3-crux")
    >>> abs(gradient_ready_times(p)[-1] - p.compute_s) < 1e-12
    True
    """
    t = forward_s(profile)
    out = []
    for ly in backward_order(profile):
        t += ly.backward_s
        out.append(t)
    return tuple(out)
