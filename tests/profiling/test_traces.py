"""Real traces read back: the H200 Kineto traces, the Chakra test data, and a gloo job recorded here."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from commsched.workload.profiling import (
    read_execution_trace,
    read_kineto,
)
from commsched.workload.profiling.records import StepProfile
from tests.paths import SHARED_DATA

H200 = SHARED_DATA / "h200-profiles"
CHAKRA = SHARED_DATA / "chakra-traces"
needs_data = pytest.mark.skipif(not H200.exists(), reason="shared data folder not present")


@pytest.fixture(scope="module")
def h200_reference() -> dict[str, Any]:
    return dict(json.loads((H200 / "profiles.json").read_text())["models"])


@pytest.fixture(scope="module")
def h200_traces() -> dict[str, StepProfile]:
    return {m: read_kineto(H200 / f"trace-{m}.json.gz") for m in ("resnet50", "bert-base")}


@needs_data
@pytest.mark.parametrize("model", ["resnet50", "bert-base"])
def test_kineto_busy_time_matches_the_measured_medians(
    model: str, h200_traces: dict[str, StepProfile], h200_reference: dict[str, Any]
) -> None:
    p, ref = h200_traces[model], h200_reference[model]
    bf16 = ref["bf16-autocast"]
    assert abs(p.compute_s / bf16["compute_s"] - 1) <= 0.10
    assert (
        abs(p.forward_s / bf16["forward_s"] - 1) <= 0.15
        and abs(p.backward_s / bf16["backward_s"] - 1) <= 0.15
    )
    assert abs(p.sync_bytes / (4 * ref["params"]) - 1) <= 0.01
    assert len(p.gradients) == ref["param_tensors"]
    assert p.provenance.device == "cuda" and "H200" in p.provenance.device_name
    assert p.provenance.date.startswith("2026-11-26")
    assert p.collectives == ()


@needs_data
def test_kineto_busy_time_is_not_the_span(h200_traces: dict[str, StepProfile]) -> None:
    """BERT's trace has idle gaps: the span from first to last kernel is ~30 % longer than busy time."""
    doc = json.loads(__import__("gzip").open(H200 / "trace-bert-base.json.gz").read())
    kernels = [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    span_s = (max(e["ts"] + e["dur"] for e in kernels) - min(e["ts"] for e in kernels)) * 1e-6
    assert h200_traces["bert-base"].compute_s < 0.85 * span_s


@needs_data
@pytest.mark.parametrize("model", ["resnet50", "bert-base"])
def test_kineto_layers_are_the_leaf_modules_with_parameters(
    model: str, h200_traces: dict[str, StepProfile], h200_reference: dict[str, Any]
) -> None:
    p = h200_traces[model]
    measured = h200_reference[model]["bf16-autocast"]["layers"]["layers_forward_order"]
    assert len(p.layers) == len(measured)  # one layer per leaf module with parameters (107 and 103)
    assert math.isclose(sum(ly.forward_s for ly in p.layers), p.forward_s, rel_tol=1e-9)
    assert math.isclose(sum(ly.backward_s for ly in p.layers), p.backward_s, rel_tol=1e-9)
    assert math.isclose(sum(ly.param_bytes for ly in p.layers), p.sync_bytes, rel_tol=1e-12)
    if model == "resnet50":  # the bytes of each layer, in forward order, as the hooks measured them
        assert [ly.param_bytes for ly in p.layers] == [m["param_bytes_fp32"] for m in measured]
    ready = [g.ready_s for g in p.gradients]
    assert ready == sorted(ready) and ready[-1] <= p.backward_s * 1.1


@needs_data
def test_chakra_protobuf_nodes() -> None:
    et = read_execution_trace(CHAKRA / "chakra.0.et")
    assert (et.format, et.schema, et.compute_nodes, len(et.collectives)) == ("chakra-et", "1.0.1", 3643, 21)
    kernels = [c for c in et.collectives if c.kind]  # the NCCL kernels carry comm_type and comm_size
    assert [c.kind for c in kernels] == ["BROADCAST"] * 2 + ["ALL_REDUCE"] * 5
    assert [c.size_bytes for c in kernels] == [212480, 424, 8196000, 31502336, 26255360, 26550272, 9724160]
    # the CPU-side nodes get their bytes from their input shapes: the same as their kernels'
    assert sorted({c.size_bytes for c in et.collectives}) == sorted({c.size_bytes for c in kernels})
    assert et.compute_s is not None and et.compute_s > 0


@needs_data
def test_pytorch_et_gives_the_backend_operations_not_their_parents() -> None:
    et = read_execution_trace(CHAKRA / "pytorch-et-1.0.2-chakra.0.0.4.json")
    assert et.format == "pytorch-et" and et.schema == "1.0.2-chakra.0.0.4"
    assert [c.name for c in et.collectives] == ["nccl:all_gather"] * 10
    assert {(c.size_bytes, c.group, c.kind) for c in et.collectives} == {(4.0, "0", "all_gather")}
    assert et.compute_nodes > 0


def test_gloo_job_execution_trace_has_the_ddp_buckets(gloo_job: dict[str, Any]) -> None:
    buckets = gloo_job["job"]["buckets"]
    assert len(buckets) == 2  # bucket_cap_mb=0.1 splits the 340,008 gradient bytes in two
    for rank in (0, 1):
        et = read_execution_trace(Path(gloo_job["dir"]) / f"et{rank}.json")
        # one all-reduce per bucket (sorted: two gloo worker threads may start them in either order)
        assert sorted(c.size_bytes for c in et.collectives) == sorted(buckets)
        assert {(c.name, c.group) for c in et.collectives} == {("gloo:all_reduce", "0")}
        assert et.compute_nodes > 0


def test_gloo_job_kineto_trace(gloo_job: dict[str, Any]) -> None:
    job = gloo_job["job"]
    p = read_kineto(Path(gloo_job["dir"]) / "kineto0.json")
    assert sorted(c.size_bytes for c in p.collectives) == sorted(job["buckets"])
    assert p.sync_bytes == 4 * job["params"] and len(p.gradients) == job["param_tensors"]
    assert p.provenance.device == "cpu" and p.forward_s > 0 and p.backward_s > 0
    assert [ly.name.split(":", 1)[1] for ly in p.layers] == ["aten::linear"] * 3
    assert [ly.param_bytes for ly in p.layers] == [
        4 * (64 * 256 + 256),
        4 * (256 * 256 + 256),
        4 * (256 * 10 + 10),
    ]
