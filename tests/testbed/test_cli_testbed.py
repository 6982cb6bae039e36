"""The ``commsched testbed`` commands' user errors (no root needed)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from commsched.cli.app import app
from commsched.testbed import netns


def test_without_root_up_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COMMSCHED_TESTBED_DIR", str(tmp_path))
    monkeypatch.setattr(netns, "_caps", lambda: 0)
    res = CliRunner().invoke(app, ["testbed", "up", "crux_testbed", "--name", "cstnoroot"])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "root" in lines[0] and "CAP_NET_ADMIN" in lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing recorded, nothing created


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["testbed", "down", "cstnothere"], "no testbed named"),
        (["testbed", "up", "crux_testbed", "--name", "Bad-Name"], "bad testbed name"),
        (["testbed", "up", "crux_testbed", "--name", "cstr", "--routing", "magic"], "unknown routing"),
        (["testbed", "up", "crux_testbed", "--name", "cstr", "--rate-scale", "3"], "rate scale"),
        (["testbed", "up", "single_link", "--name", "cstr"], "abstract endpoints"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    argv: list[str],
    needle: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.setenv("COMMSCHED_TESTBED_DIR", str(tmp_path))
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 2, res.output
    assert needle in res.output and "Traceback" not in res.output


def test_scenarios_name_their_topology_and_seed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from commsched.cli.cmd_testbed import _scenario

    topo, _ = _scenario("crux-fig19")  # a shipped scenario
    assert topo.params["kind"] == "crux_testbed" and len(topo.hosts) == 12
    f = tmp_path / "s.yaml"
    f.write_text("topology: {kind: two_layer_clos, tors: 2, aggs: 2, hosts_per_tor: 2}\nseed: 7\njobs: []\n")
    topo, seed = _scenario(str(f))
    assert seed == 7 and len(topo.hosts) == 4
    topo, seed = _scenario("leaf_spine")  # a topology kind with its defaults
    assert seed == 0 and topo.params["kind"] == "leaf_spine"
