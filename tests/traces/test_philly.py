"""Loaders of the Philly-derived traces on the real files in ../shared/data (skipped when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from commsched.errors import InputError
from commsched.workload import get_model
from commsched.workload.traces import (
    GAVEL,
    POLLUX,
    TIRESIAS,
    load_gavel_trace,
    load_pollux_workload,
    load_tiresias_trace,
    to_job_specs,
)
from tests.paths import SHARED_DATA

DATA = SHARED_DATA


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not present")
    return path


@pytest.mark.parametrize("labels", [GAVEL, POLLUX, TIRESIAS])
def test_every_mapping_target_is_in_the_zoo(labels: object) -> None:
    from commsched.workload.traces import LabelMap

    assert isinstance(labels, LabelMap)
    for model, _why in labels.table.values():
        get_model(model)
    get_model(labels.default)
    assert labels.provenance()[-1].endswith("default")


def test_pollux_workload() -> None:
    t = load_pollux_workload(need(DATA / "pollux-adaptdl/workloads/workload-1.csv"))
    assert len(t) == 160 and t.notes == ("160 job(s)",)
    assert {j.source for j in t.jobs} == {"cifar10", "deepspeech2", "imagenet", "ncf", "yolov3", "bert"}
    assert {j.model for j in t.jobs} <= {"resnet18", "gnmt", "resnet50", "dlrm", "resnet101", "bert-base"}
    assert all(j.duration_s > 0 for j in t.jobs)
    arrivals = [j.arrival_s for j in t.jobs]
    assert arrivals == sorted(arrivals) and arrivals[0] == 107.0
    first = t.jobs[0]
    assert (first.id, first.gpus, first.model) == ("cifar10-0", 6, "resnet18")
    assert len(to_job_specs(t)) == 160


def test_pollux_realistic_variant() -> None:
    t = load_pollux_workload(need(DATA / "pollux-adaptdl/workloads-realistic/workload-1.csv"))
    assert len(t) == 160 and t.jobs[0].gpus == 1


def test_gavel_trace() -> None:
    tp = need(DATA / "gavel/simulation_throughputs.json")
    t = load_gavel_trace(need(DATA / "gavel/traces/msr/seed=0/0e4a51.trace"), tp)
    assert len(t) > 100 and len(t.notes) == 1  # every label mapped
    first = t.jobs[0]
    assert (first.model, first.source, first.gpus, first.arrival_s) == (
        "transformer", "Transformer (batch size 128)", 1, 0.0,
    )  # fmt: skip
    assert {j.model for j in t.jobs} <= {"resnet18", "resnet50", "transformer", "gnmt", "dlrm", "alexnet"}


def test_gavel_physical_format() -> None:
    tp = need(DATA / "gavel/simulation_throughputs.json")
    t = load_gavel_trace(need(DATA / "gavel/traces/physical_cluster/artifact_evaluation.trace"), tp)
    assert t.jobs and all(j.duration_s > 0 for j in t.jobs)


def test_gavel_bad_line(tmp_path: Path) -> None:
    tp = need(DATA / "gavel/simulation_throughputs.json")
    (tmp_path / "x.trace").write_text("ResNet-18 (batch size 64)\tcmd\n")
    with pytest.raises(InputError, match=r"x\.trace:1"):
        load_gavel_trace(tmp_path / "x.trace", tp)


def test_tiresias_60_jobs() -> None:
    t = load_tiresias_trace(need(DATA / "tiresias/60_job.csv"))
    assert len(t) == 60 and len(t.notes) == 1
    assert sorted({j.gpus for j in t.jobs}) == [1, 2, 4, 8]
    assert {j.source: j.model for j in t.jobs}["googlenet"] == "inception_v3"
    assert t.jobs[0].duration_s == 164.0


def test_tiresias_bad_number(tmp_path: Path) -> None:
    f = tmp_path / "j.csv"
    f.write_text("job_id,num_gpu,submit_time,model_name,duration\n0,x,0,vgg16,10\n")
    with pytest.raises(InputError, match=r"j\.csv:2: num_gpu"):
        load_tiresias_trace(f)
