"""Every experiment module has a typed entry point that runs (smoke tests on small inputs)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from commsched.experiments import byteps_maxmin, compression_check
from commsched.experiments.microbench import paper as microbench_paper
from commsched.experiments.ps.versus_ring import VersusSpec
from commsched.io.shipped import resolve_scenario


def test_byteps_maxmin_estimate_and_main(capsys: pytest.CaptureFixture[str]) -> None:
    e = byteps_maxmin.estimate(
        VersusSpec(workers=4, cpu_machines=2, model_bytes=2_000_000, tensors=40), goodput_bps=1e8
    )
    # max-min sharing is no faster than the busiest-NIC schedule; pacing by share gets closer to it
    assert e.busiest_nic_s * 0.99 <= e.paced_s <= e.maxmin_s
    assert e.model_speedup == pytest.approx(1.25)
    assert byteps_maxmin.main(["--mbytes", "2", "--tensors", "40"]) == 0
    assert "speed-up over the ring" in capsys.readouterr().out


def test_compression_check_counts_decisions() -> None:
    sc = resolve_scenario("crux-fig19")
    sc = replace(sc, priority_levels=2, horizon_s=60.0)  # four jobs, two classes: every decision checked
    c = compression_check.check_compression(sc)
    assert c.decisions >= 1 and c.largest >= 1
    assert c.inverted == 0  # a valid compression never inverts a contending pair
    assert c.same <= c.pairs


def test_microbench_paper_parses_its_options() -> None:
    with pytest.raises(SystemExit) as exc:
        microbench_paper.main(["--help"])
    assert exc.value.code == 0


@pytest.mark.parametrize(
    "module", ["commsched.experiments.ps", "commsched.experiments.ps.versus_procs", "commsched.runtime.ps"]
)
def test_process_entry_points_refuse_bad_arguments_in_one_line(module: str) -> None:
    res = subprocess.run([sys.executable, "-m", module, "nope"], capture_output=True, text=True, check=False)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
