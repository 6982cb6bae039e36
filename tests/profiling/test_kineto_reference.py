"""The Kineto reader against references of its own: busy time and collective sizes.

* Busy time is the length of the union of the GPU work a phase launched. The reference counts, one by
  one, the microseconds that some interval covers (integer end points, so the count is exact), on random
  nested and overlapping intervals, and on a small trace written here whose busy times are added up by
  hand.
* A collective recorded without ``Input Dims`` is sized from ``In msg nelems`` times the element size of
  its ``dtype``; the trace below has such collectives and the expected bytes are multiplied out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from commsched.workload.profiling import read_kineto
from commsched.workload.profiling.kineto_events import union_s


def covered_us(intervals: list[tuple[int, int]]) -> int:
    """Microseconds covered by at least one interval, counted one by one."""
    return len({t for a, b in intervals for t in range(a, b)})


@st.composite
def kernels(draw: st.DrawFn) -> list[tuple[int, int]]:
    """Intervals on a 400 us line: free ones, and ones drawn inside or across an earlier one."""
    out: list[tuple[int, int]] = []
    for _ in range(draw(st.integers(0, 12))):
        how = draw(st.sampled_from(["free", "nested", "overlapping"]) if out else st.just("free"))
        if how == "free":
            a = draw(st.integers(0, 380))
            out.append((a, a + draw(st.integers(0, 20))))
            continue
        pa, pb = out[draw(st.integers(0, len(out) - 1))]
        a = draw(st.integers(pa, pb))
        b = draw(st.integers(a, pb)) if how == "nested" else draw(st.integers(a, pb + 20))
        out.append((a, b))
    return out


@given(kernels())
@example([(0, 100), (10, 20)])  # a kernel inside another: the busy time stays the outer one's
@example([(0, 100), (10, 20), (50, 60), (90, 130)])
@example([(5, 5), (5, 5)])
def test_busy_time_is_the_union_of_nested_and_overlapping_kernels(intervals: list[tuple[int, int]]) -> None:
    shuffled = sorted(intervals, key=lambda iv: (-iv[1], iv[0]))  # an order the reader did not choose
    assert union_s([(float(a), float(b)) for a, b in shuffled]) == pytest.approx(
        covered_us(intervals) * 1e-6, abs=1e-15
    )


# --- a synthetic trace: one ProfilerStep, forward and backward ops, their kernels, three collectives

THREAD = {"pid": 1, "tid": 1}


def _cpu(name: str, ts: float, dur: float, cat: str = "cpu_op", **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": args, **THREAD}


def _launch(ts: float, corr: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 1,
            "args": {"correlation": corr}, **THREAD}  # fmt: skip


def _kernel(ts: float, dur: float, corr: int, stream: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": f"k{corr}", "ts": ts, "dur": dur, "pid": 0, "tid": stream,
            "args": {"correlation": corr}}  # fmt: skip


def trace() -> dict[str, Any]:
    """Forward kernels [200, 300), [220, 250) (nested), [280, 350) (overlapping): 150 us busy.
    Backward kernels [400, 500), [410, 420) (nested), [600, 620): 120 us busy."""
    events = [
        _cpu("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        _cpu("aten::linear", 10, 20),
        _launch(12, 1),
        _launch(14, 2),
        _launch(16, 3),
        _cpu("autograd::engine::evaluate_function: AddmmBackward0", 100, 30),
        _launch(105, 4),
        _launch(108, 5),
        _launch(110, 6),
        _kernel(200, 100, 1, stream=7),
        _kernel(220, 30, 2, stream=8),
        _kernel(280, 70, 3, stream=9),
        _kernel(400, 100, 4, stream=7),
        _kernel(410, 10, 5, stream=8),
        _kernel(600, 20, 6, stream=7),
        # collectives: two recorded with element counts only, one with its input's dims
        _cpu(
            "nccl:all_reduce", 700, 10, **{"In msg nelems": 1000, "dtype": "Float", "Process Group Name": "0"}
        ),
        _cpu(
            "nccl:all_gather", 720, 10, **{"In msg nelems": 3, "dtype": "BFloat16", "Process Group Name": "1"}
        ),
        _cpu(
            "gloo:broadcast",
            740,
            10,
            **{"Input Dims": [[10, 20]], "Input type": ["double"], "In msg nelems": 1},
        ),
    ]
    return {"traceEvents": events, "deviceProperties": [{"name": "test GPU"}]}


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "synthetic.json"
    path.write_text(json.dumps(trace()))
    return path


def test_busy_time_of_a_trace_with_nested_kernels(trace_file: Path) -> None:
    p = read_kineto(trace_file)
    assert p.forward_s == pytest.approx(150e-6, abs=1e-12)  # 200..350: the nested kernel adds nothing
    assert p.backward_s == pytest.approx(120e-6, abs=1e-12)  # 400..500 and 600..620
    assert p.provenance.device == "cuda"


def test_collective_sizes_fall_back_to_element_counts(trace_file: Path) -> None:
    got = [(c.name, c.kind, c.group, c.size_bytes) for c in read_kineto(trace_file).collectives]
    assert got == [
        ("nccl:all_reduce", "all_reduce", "0", 4000.0),  # 1000 elements x 4 bytes (Float)
        ("nccl:all_gather", "all_gather", "1", 6.0),  # 3 elements x 2 bytes (BFloat16)
        ("gloo:broadcast", "broadcast", "", 1600.0),  # its input, 10 x 20 doubles x 8 bytes, comes first
    ]
