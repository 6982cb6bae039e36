"""Strict AICB and SimAI readers: every malformed log is one line with its file and line, exit 2.

Each case below is built from a real AICB or SimAI file by the edit a practitioner would meet (a wrong
header, a number out of bounds, a file cut at a row boundary or mid-row); the expected line numbers
are counted here from the edited text.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from commsched.cli.app import app
from commsched.errors import InputError
from commsched.workload.parallel import GroupKind
from commsched.workload.traces.aicb import read_aicb
from commsched.workload.traces.simai import read_simai

runner = CliRunner()
DATA = Path("/work/shared/data/aicb-workloads")
G13B = DATA / "physical/model_workload/G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1.csv"
L65B_PP8 = DATA / "physical/model_workload/L65B-M1-C05_Llama65B_megatron_tp2_pp8_mbs1.csv"
SIMAI_G13B = DATA / "simAI/model_workload/G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt"
SIMAI_MOE = Path("/work/shared/data/simai-examples/workload_analytical.txt")
pytestmark = pytest.mark.skipif(not G13B.exists(), reason="the AICB workloads are not on this machine")


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _first(lines: list[str], pred: str) -> int:
    """Index of the first line containing ``pred`` after the first epoch_end (an iteration row)."""
    start = next(k for k, x in enumerate(lines) if x.startswith("CommType.epoch_end"))
    return next(k for k in range(start + 1, len(lines)) if pred in lines[k])


def _with_msg_size(lines: list[str], k: int, value: str) -> list[str]:
    f = lines[k].split(",")
    f[3] = value
    return [*lines[:k], ",".join(f), *lines[k + 1 :]]


def _aicb_cases() -> list[tuple[str, list[str], int, str]]:
    """(name, edited lines, 1-based line of the fault, words of the message)."""
    lines = _lines(G13B)
    k = _first(lines, "CommGroup.dp_group")
    last_iteration_row = max(i for i, x in enumerate(lines) if x.startswith("CommType.epoch_end"))
    swapped = lines[1].replace("comm_group_size,msg_size", "comm_group_sz,msg_size")
    return [
        ("header by name", [lines[0], swapped, *lines[2:]], 2, "column header lacks comm_group_size"),
        ("msg_size 1e26", _with_msg_size(lines, k, "1e26"), k + 1, "msg_size '1e26' out of bounds"),
        ("msg_size -5", _with_msg_size(lines, k, "-5"), k + 1, "msg_size '-5' out of bounds"),
        ("msg_size nan", _with_msg_size(lines, k, "nan"), k + 1, "msg_size 'nan' out of bounds"),
        ("cut at a row", lines[:last_iteration_row], last_iteration_row, "no closing epoch_end"),
        ("cut mid-row", [*lines[: k + 1], lines[k + 1][:30]], k + 2, "fields, the header has 12"),
        ("count 0", [*lines[:k], lines[k].rsplit(",", 1)[0] + ",0", *lines[k + 1 :]], k + 1, "count 0"),
    ]


@pytest.mark.parametrize("case", _aicb_cases(), ids=lambda c: c[0])
def test_a_malformed_aicb_log_is_refused_with_its_file_and_line(
    case: tuple[str, list[str], int, str], tmp_path: Path
) -> None:
    name, lines, line_no, words = case
    path = tmp_path / "G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_aicb(path)
    assert err.value.where == f"{path}:{line_no}", (name, err.value.line())
    assert words in err.value.what, (name, err.value.line())
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "topology: {kind: two_layer_clos, tors: 4, aggs: 2, hosts_per_tor: 4}\npolicy: ecmp-fair\n"
        f"horizon_s: 1\njobs:\n  - {{id: a, aicb: {path}, model: gpt-13b@h200}}\n",
        encoding="utf-8",
    )
    res = runner.invoke(app, ["simulate", str(scenario)])
    assert res.exit_code == 2, res.output
    out = res.stderr.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("error:") and f"{path}:{line_no}" in out[0], out
    assert "Traceback" not in res.output


def test_a_header_in_another_column_order_is_read_by_name(tmp_path: Path) -> None:
    """msg_size and comm_group_size swapped in the header and in every row: the same workload."""
    out = []
    for line in _lines(G13B):
        f = line.split(",")
        if not line.startswith("[") and len(f) == 12:
            f[2], f[3] = f[3], f[2]
        out.append(",".join(f))
    path = tmp_path / "swapped.csv"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    a, b = read_aicb(G13B), read_aicb(path)
    for kind in GroupKind:
        assert a.message_bytes(kind) == b.message_bytes(kind)
    assert a.parallel == b.parallel


def test_the_pipelined_log_without_dp_rows_says_so() -> None:
    w = read_aicb(L65B_PP8)
    dp_rows = 0  # counted here: iteration rows (between epoch_end rows, not init) of the DP group
    inside = False
    for line in _lines(L65B_PP8):
        if line.startswith("CommType.epoch_end"):
            inside = not inside
        elif inside and ",CommGroup.dp_group," in line and ",init" not in line:
            dp_rows += 1
    assert dp_rows == 0 and w.parallel.dp == 128 // (2 * 8)
    assert w.absent == (GroupKind.DP,)
    assert "no dp rows in the iteration though the layout implies dp 8" in w.source
    assert read_aicb(G13B).absent == ()


def _simai_cases() -> list[tuple[str, list[str], int, str]]:
    lines = _lines(SIMAI_G13B)
    k = next(i for i, x in enumerate(lines) if "ALLREDUCE" in x and i > 1)
    f = lines[k].split()
    big = [*f[:4], "1e26", *f[5:]]
    neg = [*f[:4], "-5", *f[5:]]
    bad_type = [*f[:3], "ALLREDUCEX", *f[4:]]
    return [
        ("header field", [lines[0].replace("checkpoints:", "checkpointz:"), *lines[1:]], 1, "unknown header"),
        (
            "bytes 1e26",
            [*lines[:k], "\t".join(big), *lines[k + 1 :]],
            k + 1,
            "fwd bytes '1e26' out of bounds",
        ),
        ("bytes -5", [*lines[:k], "\t".join(neg), *lines[k + 1 :]], k + 1, "fwd bytes '-5' out of bounds"),
        ("unknown type", [*lines[:k], "\t".join(bad_type), *lines[k + 1 :]], k + 1, "ALLREDUCEX"),
        ("cut at a line", lines[:-5], len(lines) - 5, "the file has"),
        ("cut mid-line", [*lines[:-1], lines[-1][:12]], len(lines), "fields (a line cut short?)"),
    ]


@pytest.mark.parametrize("case", _simai_cases(), ids=lambda c: c[0])
def test_a_malformed_simai_file_is_refused_with_its_file_and_line(
    case: tuple[str, list[str], int, str], tmp_path: Path
) -> None:
    name, lines, line_no, words = case
    path = tmp_path / "w.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_simai(path, gpus=128)
    assert err.value.where == f"{path}:{line_no}", (name, err.value.line())
    assert words in err.value.what, (name, err.value.line())


@pytest.mark.skipif(not SIMAI_MOE.exists(), reason="the SimAI example is not on this machine")
def test_the_simai_reader_keeps_vpp() -> None:
    head = _lines(SIMAI_MOE)[0].split()
    vpp = int(head[head.index("vpp:") + 1])
    assert vpp == 8 and read_simai(SIMAI_MOE).parallel.vpp == vpp


@pytest.mark.parametrize(
    ("parallel", "words"),
    [
        ("{tp: 1, pp: 32}", "parallel.pp: pp = 32 stages for a model of 24 transformer layers"),
        ("{tp: 8, dp: 4, micro_batches: 3}", "3 micro-batches do not divide the batch of 16 sequences"),
    ],
)
def test_shapes_no_framework_runs_are_refused(parallel: str, words: str, tmp_path: Path) -> None:
    """gpt3-crux: 24 transformer layers, a DP replica's batch of 16 sequences (its profile)."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "topology: {kind: two_layer_clos, tors: 4, aggs: 4, hosts_per_tor: 2}\npolicy: ecmp-fair\n"
        f"horizon_s: 1\njobs:\n  - {{id: p, model: gpt3-crux@h200-bf16, gpus: 32, parallel: {parallel}}}\n",
        encoding="utf-8",
    )
    res = runner.invoke(app, ["simulate", str(scenario)])
    assert res.exit_code == 2, res.output
    out = res.stderr.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("error:") and words in out[0], out
