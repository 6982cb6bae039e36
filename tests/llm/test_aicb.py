"""AICB per-collective logs read into grouped jobs: bytes per group kind as the file lists them.

The expected values are summed here from the CSV with the plain ``csv`` module (rows between a section's
two ``epoch_end`` rows, ``init`` rows left out), independently of the reader.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

import pytest

from commsched.errors import InputError
from commsched.scheduling.groups import grouped_steps
from commsched.workload.parallel import GroupKind
from commsched.workload.traces.aicb import read_aicb

DATA = Path("/work/shared/data/aicb-workloads/physical/model_workload")
FILES = sorted(DATA.glob("*.csv")) if DATA.is_dir() else []
pytestmark = pytest.mark.skipif(not FILES, reason="the AICB workloads are not on this machine")

GROUP = {
    "CommGroup.tp_group": "tp",
    "CommGroup.pp_group": "pp",
    "CommGroup.dp_group": "dp",
    "CommGroup.ep_group": "ep",
}


def _iteration_rows(path: Path) -> list[tuple[int, list[str]]]:
    """(section, row) of every iteration row."""
    out: list[tuple[int, list[str]]] = []
    section, inside = -1, False
    with path.open(newline="") as fh:
        for row in csv.reader(fh):
            if not row:
                continue
            if row[0].startswith("["):
                section, inside = section + 1, False
            elif row[0] == "CommType.epoch_end":
                section = max(section, 0)
                inside = not inside
            elif inside and row[0] != "comm_type" and not row[4].startswith("init"):
                out.append((section, row))
    return out


def _listed_bytes(path: Path) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for _, row in _iteration_rows(path):
        if row[1] in GROUP:
            out[GROUP[row[1]]] += float(row[3]) * int(row[11] or 1)
    return out


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_bytes_per_group_kind_are_the_files(path: Path) -> None:
    listed = _listed_bytes(path)
    work = read_aicb(path)
    for kind in GroupKind:
        want = listed.get(kind.value, 0.0)
        assert math.isclose(work.message_bytes(kind), want, rel_tol=1e-3), (
            kind,
            work.message_bytes(kind),
            want,
        )
    assert work.parallel.ranks == 128


def _wire_bytes_rank0(path: Path) -> float:
    """What global rank 0 (stage 0) sends per iteration, from each row's algorithm: a ring all-reduce
    sends 2 (n-1) M / n, a ring reduce-scatter or all-gather (n-1) M / n, a chain broadcast M from the
    root (rank 0 is every group's root here), a pairwise all-to-all (n-1) M / n, an isend M."""
    total = 0.0
    for section, row in _iteration_rows(path):
        if section > 0 or row[1] not in GROUP:
            continue
        op, n, m = row[0].removeprefix("CommType."), int(row[2]), float(row[3]) * int(row[11] or 1)
        if op == "all_reduce":
            total += 2 * (n - 1) * m / n
        elif op in ("reduce_scatter", "all_gather", "all_to_all"):
            total += (n - 1) * m / n
        elif op == "broadcast" and n > 1:
            total += m
        elif op == "isend" and row[4].startswith("forward"):
            total += m  # stage 0 sends only forward
    return total


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_rank_zero_puts_on_the_wire_what_each_algorithm_sends(path: Path) -> None:
    sent = 0.0
    for gs in grouped_steps(read_aicb(path)):
        sent += gs.step.repeat * sum(t.size_bytes for t in gs.step.transfers if t.src == 0)
    assert math.isclose(sent, _wire_bytes_rank0(path), rel_tol=1e-9)


def test_pipelined_log_gives_its_degrees_and_micro_batches() -> None:
    path = DATA / "L65B-M1-C05_Llama65B_megatron_tp2_pp8_mbs1.csv"
    p = read_aicb(path).parallel
    forward_sends = sum(1 for s, r in _iteration_rows(path) if s == 0 and r[0] == "CommType.isend")
    assert (p.tp, p.pp, p.dp, p.micro_batches) == (2, 8, 8, forward_sends)


def test_a_file_that_is_not_a_log_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.csv"
    bad.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(InputError, match="column header lacks comm_type"):
        read_aicb(bad)


SIMAI = Path("/work/shared/data/simai-examples/workload_analytical.txt")


def _simai_listed(path: Path) -> dict[str, float]:
    """Bytes per group kind summed from the text: fwd/ig types in TP (EP where they end in _EP), wg in
    DP; pp_comm per micro-batch, both ways, on every boundary."""
    lines = path.read_text(encoding="utf-8").splitlines()
    head = lines[0].split()
    val = {head[i].rstrip(":"): int(head[i + 1]) for i in range(1, len(head) - 1) if head[i + 1].isdigit()}
    out: dict[str, float] = defaultdict(float)
    for line in lines[2:]:
        f = line.split()
        for kind_col, size_col, phase in ((3, 4, "fwd"), (6, 7, "ig"), (9, 10, "wg")):
            if f[kind_col] == "NONE":
                continue
            if phase == "wg":
                out["dp"] += float(f[size_col])
            else:
                out["ep" if f[kind_col].endswith("_EP") else "tp"] += float(f[size_col])
    out["pp"] = 2 * (val.get("pp", 1) - 1) * val.get("ga", 1) * val.get("pp_comm", 0)
    return out


@pytest.mark.skipif(not SIMAI.exists(), reason="the SimAI example is not on this machine")
def test_simai_moe_workload_bytes_per_group_kind() -> None:
    from commsched.workload.traces.simai import read_simai

    work = read_simai(SIMAI)
    listed = _simai_listed(SIMAI)
    p = work.parallel
    assert (p.tp, p.pp, p.ep, p.dp, p.micro_batches) == (2, 12, 16, 9216 // 24, 24)
    for kind in GroupKind:
        assert math.isclose(work.message_bytes(kind), listed.get(kind.value, 0.0), rel_tol=1e-3), kind
    assert listed["ep"] > 0 and any(c.expert for c in work.collectives)


def test_shape_built_gpt13b_dp_bytes_match_the_aicb_log_within_one_percent() -> None:
    """GPT-13B, TP 8 x DP 16, ZeRO 1 (Megatron's distributed optimizer) built from its shape against
    AICB's log of the same layout: the DP bytes that reach the fabric within 1 %.

    The reference is the log's: its reduce-scatter (fp32 gradients) and all-gather (bf16 parameters)
    rows summed here; on 16 hosts of 8 GPUs every DP ring edge joins two hosts, and each of the 128
    ranks sends ``(n - 1) / n`` of each message.
    """
    from commsched.scheduling.state import PlacedJob
    from commsched.scheduling.traffic import fabric_bytes_by_kind
    from commsched.topology.builders import two_layer_clos
    from commsched.workload.grouped_jobs import grouped_job, job_from_aicb
    from commsched.workload.parallel import ParallelSpec

    path = DATA / "G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1.csv"
    logged = sum(
        float(r[3]) * int(r[11] or 1)
        for _, r in _iteration_rows(path)
        if r[1] == "CommGroup.dp_group" and r[0] in ("CommType.reduce_scatter", "CommType.all_gather")
    )
    topo = two_layer_clos(tors=4, aggs=4, hosts_per_tor=4)  # 16 hosts of 8 GPUs
    built = grouped_job("b", "gpt-13b@h200", gpus=128, parallel=ParallelSpec(tp=8, dp=16, zero=1))
    log = job_from_aicb("a", path, "gpt-13b@h200")
    fb_built = fabric_bytes_by_kind(topo, PlacedJob(spec=built, gpus=topo.gpus[:128]))
    fb_log = fabric_bytes_by_kind(topo, PlacedJob(spec=log, gpus=topo.gpus[:128]))
    assert fb_log["dp"] == pytest.approx(128 * 15 / 16 * logged, rel=1e-6)
    assert fb_built["dp"] == pytest.approx(fb_log["dp"], rel=0.01)
    assert fb_built["tp"] == fb_log["tp"] == 0.0  # TP 8 inside each host


def test_pipeline_wire_bytes_per_stage_and_direction_are_the_logs_isend_rows() -> None:
    """LLaMA-65B TP 2 x PP 8 x DP 8: what the ranks of stage ``s`` send to ``s + 1`` and to ``s - 1``
    per iteration, against the ``isend`` rows of section ``s`` counted here (forward_step rows to the
    next stage, backward_step rows to the previous one), times the stage's tp x dp = 16 ranks."""
    path = DATA / "L65B-M1-C05_Llama65B_megatron_tp2_pp8_mbs1.csv"
    want: dict[tuple[int, int], float] = defaultdict(float)
    for s, row in _iteration_rows(path):
        if row[0] == "CommType.isend":
            dst = s + 1 if row[4].startswith("forward") else s - 1
            want[(s, dst)] += 16 * float(row[3]) * int(row[11] or 1)
    assert want[(0, 1)] > 0 and want[(7, 6)] > 0 and (0, -1) not in want and (7, 8) not in want
    got: dict[tuple[int, int], float] = defaultdict(float)
    for gs in grouped_steps(read_aicb(path)):
        if gs.kind is GroupKind.PP:
            for t in gs.step.transfers:  # rank = t + 2 (d + 8 s): its stage is rank // 16
                got[(t.src // 16, t.dst // 16)] += gs.step.repeat * t.size_bytes
    assert set(got) == set(want)
    for key, b in want.items():
        assert math.isclose(got[key], b, rel_tol=1e-12), (key, got[key], b)
