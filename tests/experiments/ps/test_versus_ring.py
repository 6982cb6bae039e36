"""BytePS with k CPU machines against the ring all-reduce on a shaped star (root only, slow)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from commsched.errors import InputError
from commsched.experiments.ps.versus_ring import VersusResult, VersusSpec, measure_nic_goodput, versus_ring
from commsched.intrajob.byteps import byteps_assignment, byteps_times
from commsched.testbed.fabric import star_fabric

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("tc") is None, reason="needs root and iproute2 (namespaces, tc)"
)
RATE_BPS = 1e8  # 0.1 Gb/s for the fabric check
JOB_RATE_BPS = 2e8  # 0.2 Gb/s, 16 MB: the NICs, not the Python transport, bound both jobs
#: how far the all-reduce's median may sit above its model at the measured goodput (Python ring on a
#: shared 2-core box: measured 12-32 % above)
ALLREDUCE_TOLERANCE = 0.4
#: how far BytePS's median (paced by share, the default) may sit above its model: measured 9-22 %
#: above (unpaced: 42-51 %, docs/runtime-ps.md)
BYTEPS_TOLERANCE = 0.3


def test_spec_split_and_model_speedup() -> None:
    spec = VersusSpec(workers=4, cpu_machines=2, model_bytes=8_000_000, tensors=200)
    shares = spec.shares()
    assert sum(shares) == pytest.approx(1.0)
    # the mixed-mode split: 2k(n-1)/(n^2+kn-2k) = 0.6 of the bytes to the two CPU servers
    assert spec.cpu_share() == pytest.approx(0.6, abs=0.03)
    ideal = byteps_times(
        byteps_assignment(gpu_machines=4, cpu_machines=2, model_bytes=8e6), bandwidth_bps=1e9
    )
    assert ideal.speedup_vs_allreduce == pytest.approx(1.25)
    # the hash's actual split is a little off the optimum, so its speed-up is a little lower
    assert 1.0 < spec.split_speedup() <= ideal.speedup_vs_allreduce
    with pytest.raises(InputError):
        VersusSpec(workers=4, cpu_machines=0)


@needs_root
def test_star_shapes_every_nic() -> None:
    with star_fabric(RATE_BPS, hosts=3, prefix="cs6t") as fab:
        names = set(
            subprocess.run(
                ["ip", "netns", "list"], check=False, capture_output=True, text=True
            ).stdout.split()
        )
        assert {fab.hub_ns, *fab.host_ns} <= names
        # traffic crosses the bridge, at no more than the shaped rate
        assert 0.5 * RATE_BPS < measure_nic_goodput(fab, duration_s=1.0) <= 1.02 * RATE_BPS
        qd = subprocess.run(
            fab.argv(1, ["tc", "class", "show", "dev", fab.host_dev[1]]),
            check=False,
            capture_output=True,
            text=True,
        ).stdout
        assert "rate 100Mbit" in qd
    names = set(
        subprocess.run(["ip", "netns", "list"], check=False, capture_output=True, text=True).stdout.split()
    )
    assert not ({fab.hub_ns, *fab.host_ns} & names)


@pytest.fixture(scope="module")
def measured() -> VersusResult:
    if os.geteuid() != 0 or shutil.which("tc") is None:
        pytest.skip("needs root and iproute2 (namespaces, tc)")
    # no skip on load: a timing check runs in the last, serial stage of `make test` (marker `timing`),
    # and its models are taken at the NIC goodput measured in the same run
    spec = VersusSpec(workers=4, cpu_machines=2, model_bytes=16_000_000, tensors=200, iterations=5)
    res = versus_ring(spec, rate_bps=JOB_RATE_BPS, prefix="cs6t")
    s = res.summary()
    model_b, model_a = (s[k]["predicted_iteration_s"] for k in ("byteps", "allreduce"))  # type: ignore[index]
    print(
        f"\nFIGURE ps-versus-ring: goodput_bps={res.goodput_bps:.3g} "
        f"byteps_s={res.byteps.median_s:.3f} (model {model_b:.3f}) "
        f"allreduce_s={res.allreduce.median_s:.3f} (model {model_a:.3f}) "
        f"speedup={res.measured_speedup:.3f} (model {s['predicted_speedup']:.3f}) "
        f"load1={os.getloadavg()[0]:.2f}"
    )
    return res


@pytest.mark.slow
@pytest.mark.timing
def test_both_jobs_sum_exactly_and_the_ring_meets_its_model(measured: VersusResult) -> None:
    assert measured.byteps.max_abs_error < 1e-5
    assert measured.allreduce.max_abs_error < 1e-5
    assert 0.85 * JOB_RATE_BPS < measured.goodput_bps <= 1.02 * JOB_RATE_BPS
    model = measured.summary()["allreduce"]["predicted_iteration_s"]  # type: ignore[index]
    assert model * 0.9 < measured.allreduce.median_s < model * (1 + ALLREDUCE_TOLERANCE)


@pytest.mark.slow
@pytest.mark.timing
def test_paced_byteps_meets_its_model_and_beats_the_ring(measured: VersusResult) -> None:
    assert measured.spec.pacing and measured.summary()["paced"] is True
    model = measured.summary()["byteps"]["predicted_iteration_s"]  # type: ignore[index]
    assert model * 0.9 < measured.byteps.median_s < model * (1 + BYTEPS_TOLERANCE)
    # the direction of `commsched byteps`'s speed-up (1.25 at n=4, k=2; measured 1.14-1.55 paced)
    assert measured.measured_speedup > 1.0


def test_cli_rejects_a_bad_shape_in_one_line() -> None:
    from typer.testing import CliRunner

    from commsched.cli.app import app

    res = CliRunner().invoke(app, ["ps", "versus-ring", "--workers", "4", "--cpu-machines", "0"])
    assert res.exit_code == 2
    assert "Traceback" not in res.output
    res = CliRunner().invoke(app, ["ps", "versus-ring", "--mbytes", "0.00001", "--tensors", "200"])
    assert res.exit_code == 2
    assert "--mbytes" in res.output and len(res.output.strip().splitlines()) == 1
