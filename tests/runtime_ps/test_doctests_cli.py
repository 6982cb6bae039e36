"""The doctests of the runtime modules, and the command line's user errors."""

from __future__ import annotations

import doctest
import importlib

import pytest
from typer.testing import CliRunner

from commsched.cli.app import app

MODULES = [
    "commsched.runtime.ps.frame",
    "commsched.runtime.ps.keys",
    "commsched.runtime.ps.summation",
    "commsched.runtime.ps.transports",
    "commsched.runtime.ps.roles",
    "commsched.experiments.ps.emulate",
    "commsched.experiments.ps.predict",
    "commsched.experiments.ps.bench",
    "commsched.experiments.ps.dynamic",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_bench_rejects_unknown_transport_in_one_line() -> None:
    res = CliRunner().invoke(app, ["ps", "bench", "vgg16", "--loopback", "--transports", "fifo,tcp"])
    assert res.exit_code == 2
    assert "--transports" in res.output and "Traceback" not in res.output


def test_launch_without_role_is_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("DMLC_ROLE", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    res = CliRunner().invoke(app, ["ps", "launch"])
    assert res.exit_code == 2 and "no role" in res.output


def test_predicted_order_matches_the_models() -> None:
    """At 1 Gb/s with VGG-16 x0.25 bytes the model ranks mercury < bytescheduler < fifo."""
    from commsched.experiments.ps.bench import emulated_layers
    from commsched.experiments.ps.predict import predicted_iteration_s
    from commsched.runtime.ps.transports import TransportConfig
    from commsched.workload.zoo import get_model

    layers = emulated_layers(get_model("vgg16").layers, byte_scale=0.25)
    t = {n: predicted_iteration_s(layers, bandwidth_bps=0.5e9, config=TransportConfig.named(n))
         for n in ("fifo", "bytescheduler", "mercury")}  # fmt: skip
    assert t["mercury"] < t["bytescheduler"] < t["fifo"]


@pytest.mark.slow
def test_bench_json_shape_on_loopback() -> None:
    """The contract's JSON keys, from real processes on loopback (no root needed)."""
    import json

    argv = ["ps", "bench", "resnet50", "--loopback", "--iterations", "1", "--byte-scale", "0.02",
            "--transports", "fifo,mercury", "--json"]  # fmt: skip
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 0, res.output
    t = json.loads(res.output)["transports"]
    assert set(t) == {"fifo", "mercury"}
    for v in t.values():
        assert v["iteration_s"] > 0 and v["predicted_iteration_s"] > 0
        assert v["max_abs_error"] <= 1e-6


def test_dynamic_rejects_bad_levels_in_one_line() -> None:
    res = CliRunner().invoke(app, ["ps", "dynamic", "vgg16", "--levels", "1,0,0.1"])
    assert res.exit_code == 2
    assert "--levels" in res.output and "Traceback" not in res.output
