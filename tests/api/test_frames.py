"""Results as DataFrames, in memory and read back from what ``simulate --out`` / ``compare --out`` write."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import commsched as cs
from commsched.cli.app import app
from commsched.errors import InputError
from commsched.io.numbers import tidy
from commsched.sim.results.comparison import resolved

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def run() -> tuple[cs.Scenario, cs.SimResult]:
    sc = cs.load_scenario("crux-fig19")
    return sc, cs.simulate(sc, policy="crux-full", mode="fast")


def test_frames_hold_the_result(run: tuple[cs.Scenario, cs.SimResult]) -> None:
    sc, r = run
    fr = cs.result_frames(r, sc.topology)
    assert fr.summary["gpu_utilization"] == r.gpu_utilization
    assert list(fr.jobs.index) == [j.id for j in r.jobs]
    assert fr.jobs.loc["gpt", "mean_iteration_s"] == r.jobs[0].mean_iteration_s
    assert np.array_equal(fr.utilization["t_s"].to_numpy(), r.series.t)
    # busy GPU-seconds over the run agree with the utilisation series (same sampling intervals)
    assert (fr.links["utilization"] <= 1 + 1e-9).all() and len(fr.links) > 0
    assert set(fr.links["kind"]) <= {str(k) for k in {lk.kind for lk in sc.topology.links}}


def test_frames_read_back_from_the_cli_outputs_equal_the_frames_in_memory(
    run: tuple[cs.Scenario, cs.SimResult], tmp_path: Path
) -> None:
    sc, r = run
    out = CliRunner().invoke(
        app, ["simulate", "crux-fig19", "--policy", "crux-full", "--mode", "fast", "--out", str(tmp_path)]
    )
    assert out.exit_code == 0, out.output
    back = cs.read_result(tmp_path)
    mem = cs.result_frames(r, sc.topology)
    for key in ("policy", "mode", "seed", "gpu_utilization", "allocated_gpu_utilization", "events"):
        # summary.json holds floats to 12 significant digits, fractions clamped to [0, 1]
        assert back.summary[key] == tidy(mem.summary[key], key), key
    pd.testing.assert_frame_equal(back.jobs, mem.jobs, check_dtype=False)
    # the CSV time series keep six significant digits
    pd.testing.assert_frame_equal(back.utilization, mem.utilization, rtol=1e-5)
    pd.testing.assert_frame_equal(back.links, mem.links, rtol=1e-5, check_dtype=False)


def test_comparison_frame_and_read_back(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    cmp = cs.compare("crux-fig19", ["ecmp-fair", "crux-full"], mode="fast")
    df = cs.comparison_frame(cmp)
    assert list(df.index) == ["ecmp-fair", "crux-full"]
    assert df.loc["crux-full", "gpu_utilization"] == cmp.summaries[1].gpu_utilization
    out = CliRunner().invoke(
        app,
        [
            "compare",
            "crux-fig19",
            "--policies",
            "ecmp-fair,crux-full",
            "--mode",
            "fast",
            "--out",
            str(tmp_path),
        ],
    )
    assert out.exit_code == 0, out.output
    back = cs.read_comparison(tmp_path)
    cols = [c for c in df.columns if c != "wall_time_s"]
    # compare.json holds floats to 10 significant digits (what the model resolves), fractions clamped
    tidied = df[cols].apply(lambda col: col.map(lambda v: tidy(resolved(v), str(col.name))))
    pd.testing.assert_frame_equal(back[cols], tidied, check_dtype=False, check_exact=True)
    assert json.loads((tmp_path / "compare.json").read_text())["scenario"] == "crux-fig19"


def test_reading_a_missing_or_foreign_directory_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"summary\.json: file not found"):
        cs.read_result(tmp_path)
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "utilization.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="missing column"):
        cs.read_result(tmp_path)
    (tmp_path / "compare.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="no 'policies' object"):
        cs.read_comparison(tmp_path)
