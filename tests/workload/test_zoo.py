"""The model zoo: required models, provenance, per-layer consistency, rebuild from the shared data."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from commsched.errors import InputError, UnknownNameError, ValidationError
from commsched.workload import (
    backward_order,
    backward_s,
    forward_s,
    get_model,
    gradient_ready_times,
    job_from_model,
    layer_bytes,
    list_models,
    model_names,
)
from commsched.workload.profiling.profiles_io import read_zoo_json, write_zoo_json
from commsched.workload.records import PRECISIONS, PROVENANCE_KINDS, ModelProfile
from tests.paths import SHARED_DATA

DATA = SHARED_DATA
REQUIRED = [
    "gpt3-crux", "bert-base", "bert-large", "resnet50", "vgg16", "vgg19", "alexnet", "gnmt", "transformer",
    "moe-simai", "dlrm",
]  # fmt: skip
PROFILES = list_models()


def test_zoo_names_required_models() -> None:
    assert set(REQUIRED) <= set(model_names())
    assert len(set(model_names())) == len(model_names())


@pytest.mark.parametrize("p", PROFILES, ids=lambda p: p.name)
def test_profile_is_positive_and_has_provenance(p: ModelProfile) -> None:
    assert p.compute_s > 0 and math.isfinite(p.compute_s)
    assert p.sync_bytes > 0 and math.isfinite(p.sync_bytes)
    assert 0 < p.overlap <= 1
    assert p.source.strip() and p.gpu.strip()
    for ly in p.layers:
        assert ly.forward_s >= 0 and ly.backward_s >= 0 and ly.param_bytes >= 0


@pytest.mark.parametrize("p", [p for p in PROFILES if p.layers], ids=lambda p: p.name)
def test_layer_sums_match_totals(p: ModelProfile) -> None:
    assert math.isclose(forward_s(p) + backward_s(p), p.compute_s, rel_tol=1e-9)
    assert math.isclose(sum(layer_bytes(p)), p.sync_bytes, rel_tol=1e-9)
    assert math.isclose(forward_s(p) / p.compute_s, p.overlap, rel_tol=1e-9)
    ready = gradient_ready_times(p)
    assert all(a <= b for a, b in itertools.pairwise(ready))
    assert math.isclose(ready[-1], p.compute_s, rel_tol=1e-9)
    assert backward_order(p)[0] == p.layers[-1]


#: what each older entry's own source states about arithmetic (read from the source files and papers)
OLDER_PRECISION = {
    "gpt3-crux": "fp32-grads", "bert-base": "fp32-grads", "bert-large": "fp32-grads",  # fp32 grads, AICB rate
    "resnet50": "fp32", "resnet18": "fp32", "resnet101": "fp32", "vgg16": "fp32", "vgg19": "fp32",
    "alexnet": "fp32",  # conv1 activation bytes = batch x C x H x W x 4 B
    "inception_v3": "fp32-grads", "gnmt": "fp32-grads",  # only parameter_size is stated as fp32
    "transformer": "unrecorded", "dlrm": "unrecorded", "moe-simai": "unrecorded",  # simulator inputs
}  # fmt: skip


@pytest.mark.parametrize("p", PROFILES, ids=lambda p: p.name)
def test_every_entry_has_a_documented_precision_and_structured_provenance(p: ModelProfile) -> None:
    assert p.precision in PRECISIONS
    assert p.provenance is not None and p.provenance.kind in PROVENANCE_KINDS
    assert p.provenance.reference.strip()
    assert all(a.strip() for a in p.provenance.assumptions)
    # the precision agrees with the entry's prose: 4-byte (fp32) gradients are stated exactly where claimed
    assert ("fp32" in p.source or "x 4 B" in p.source) == (p.precision != "unrecorded")
    if p.precision == "bf16":
        assert "bf16 autocast" in p.source


def test_older_entries_state_what_their_source_supports() -> None:
    assert {p.name: p.precision for p in PROFILES if "@" not in p.name} == OLDER_PRECISION
    kinds = {p.name: p.provenance.kind for p in PROFILES if p.provenance}
    assert kinds["gpt3-crux"] == kinds["bert-base"] == "analytic"
    assert kinds["resnet50"] == kinds["gnmt"] == kinds["resnet50@h200-bf16"] == "measured"
    assert kinds["vgg19"] == "derived" and kinds["dlrm"] == kinds["moe-simai"] == "simulator-workload"
    assert "1 GHz" in " ".join(get_model("transformer").provenance.assumptions)  # type: ignore[union-attr]
    assert get_model("vgg19").provenance.reference.startswith(  # type: ignore[union-attr]
        "pipedream-profiles/vgg16.graph.txt"
    )


def test_known_numbers() -> None:
    # fp32 parameter bytes of the torchvision models (PipeDream parameter_size sums)
    assert get_model("vgg16").sync_bytes == 138_357_544 * 4
    assert get_model("vgg19").sync_bytes == 143_667_240 * 4
    assert get_model("resnet50").sync_bytes == 25_557_032 * 4
    gpt = get_model("gpt3-crux")
    assert gpt.sync_bytes == 355_919_872 * 4
    assert len([ly for ly in gpt.layers if ly.name.startswith("block")]) == 24
    for name, published in (("bert-base", 110e6), ("bert-large", 340e6)):
        assert abs(get_model(name).sync_bytes / 4 / published - 1) < 0.03
    assert abs(gpt.overlap - 1 / 3) < 1e-9


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("resnet50", "resnet50"), ("ResNet-50", "resnet50"), ("RESNET_50", "resnet50"), ("bert", "bert-base"),
        ("gpt", "gpt3-crux"), ("vgg16", "vgg16"), ("VGG-19", "vgg19"), ("inception3", "inception_v3"),
        ("googlenet", "inception_v3"), ("moe", "moe-simai"), ("Transformer", "transformer"), ("nmt", "gnmt"),
    ],
)  # fmt: skip
def test_aliases(alias: str, name: str) -> None:
    assert get_model(alias).name == name


def test_unknown_model_lists_valid_names() -> None:
    with pytest.raises(UnknownNameError) as exc:
        get_model("lenet5")
    assert "resnet50" in exc.value.valid and "gpt3-crux" in exc.value.valid


def test_shipped_zoo_roundtrips(tmp_path: Path) -> None:
    out = tmp_path / "zoo.json"
    write_zoo_json(PROFILES, out, provenance="test")
    assert read_zoo_json(out) == PROFILES
    (tmp_path / "bad.json").write_text('{"models": [{"name": "x"}]}')
    with pytest.raises(InputError, match="models\\[0\\]"):
        read_zoo_json(tmp_path / "bad.json")
    entry = '{"name": "x", "gpu": "g", "compute_s": 1, "sync_bytes": 1, "overlap": 1, "source": "s", '
    (tmp_path / "prov.json").write_text('{"models": [' + entry + '"provenance": {"kind": "measured"}}]}')
    with pytest.raises(InputError, match="models\\[0\\]"):
        read_zoo_json(tmp_path / "prov.json")


@pytest.mark.skipif(not DATA.exists(), reason="shared data folder not present")
def test_shipped_zoo_equals_rebuild_from_data() -> None:
    from commsched.workload.zoo.build import build_zoo

    assert build_zoo(DATA) == PROFILES


@pytest.mark.skipif(not DATA.exists(), reason="shared data folder not present")
def test_cross_checks_against_other_sources() -> None:
    from commsched.workload.profiling.profiles_io import read_tiresias_tensors, read_workload

    tiresias = DATA / "tiresias" / "model_tensor_sizes_mb.csv"
    for name, model in (("vgg19", "vgg19"), ("vgg16", "vgg16")):
        # Tiresias keeps only the large tensors, rounded to 0.1 MiB
        assert abs(sum(read_tiresias_tensors(tiresias, model)) / get_model(name).sync_bytes - 1) < 0.01
    astra = read_workload(DATA / "astra-sim-v1-workloads" / "Resnet50_DataParallel.txt")
    astra_bytes = sum(ly.wg_bytes for ly in astra.layers)
    assert abs(astra_bytes / get_model("resnet50").sync_bytes - 1) < 0.01


def test_job_from_model() -> None:
    job = job_from_model("j", "ResNet-50", gpus=8, iterations=10)
    assert job.profile is get_model("resnet50") and job.gpus == 8
    with pytest.raises(ValidationError, match="gpus"):
        job_from_model("j", "resnet50", gpus=0)
    with pytest.raises(UnknownNameError):
        job_from_model("j", "nope", gpus=1)
