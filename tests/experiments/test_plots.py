"""Every picture of a comparison renders (matplotlib Agg) and shows the data it is given."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from commsched.api.comparing import compare_named as compare
from commsched.io.scenario import Scenario
from commsched.io.shipped import resolve_scenario
from commsched.sim.comparison import Comparison

pytest.importorskip("matplotlib")

from matplotlib import image as mpimg

from commsched.experiments.plots import write_plots

NAMES = ["utilization", "utilization_over_time", "jct_cdf", "link_intensity", "throughput_loss"]


@pytest.fixture(scope="module")
def demo() -> tuple[Scenario, Comparison]:
    """The shipped demo's first half hour: jobs arrive, contend on uplinks and finish."""
    scenario = replace(resolve_scenario("demo"), horizon_s=1800.0)
    cmp = compare(scenario, ["ecmp-fair", "crux-full"])
    assert any(j.finished for r in cmp.results for j in r.jobs)
    return scenario, cmp


def _pixels(path: Path) -> np.ndarray:
    return np.asarray(mpimg.imread(path))


def test_every_plot_renders(demo: tuple[Scenario, Comparison], tmp_path: Path) -> None:
    scenario, cmp = demo
    paths = write_plots(cmp, scenario.topology, tmp_path)
    assert [p.name for p in paths] == [f"{n}.png" for n in NAMES]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        px = _pixels(p)
        assert px.ndim == 3 and px.shape[0] > 200 and px.shape[1] > 200
        assert float(px[..., :3].std()) > 0.01, f"{p.name} is blank"


def test_plots_follow_the_data(demo: tuple[Scenario, Comparison], tmp_path: Path) -> None:
    """Changed figures give changed pictures; the same figures give the same pictures."""
    scenario, cmp = demo
    first = write_plots(cmp, scenario.topology, tmp_path / "a")
    again = write_plots(cmp, scenario.topology, tmp_path / "b")
    halved = replace(
        cmp, summaries=tuple(replace(s, gpu_utilization=s.gpu_utilization / 2) for s in cmp.summaries)
    )
    one = replace(cmp, summaries=cmp.summaries[:1], results=cmp.results[:1])
    changed = write_plots(halved, scenario.topology, tmp_path / "c")
    fewer = write_plots(one, scenario.topology, tmp_path / "d")
    for a, b in zip(first, again, strict=True):
        assert np.array_equal(_pixels(a), _pixels(b)), a.name
    assert not np.array_equal(_pixels(first[0]), _pixels(changed[0]))  # the bars' heights
    for a, d in zip(first[1:], fewer[1:], strict=True):  # one policy's curves, panels and bars fewer
        pa, pd = _pixels(a), _pixels(d)
        assert pa.shape != pd.shape or not np.array_equal(pa, pd), a.name


def test_plots_of_an_idle_run(tmp_path: Path) -> None:
    """Nothing has arrived yet: no finished job, no link traffic; every picture still renders."""
    scenario = replace(resolve_scenario("crux-fig19"), horizon_s=1e-3)
    cmp = compare(scenario, ["ecmp-fair"])
    assert not any(j.finished for r in cmp.results for j in r.jobs)
    paths = write_plots(cmp, scenario.topology, tmp_path)
    assert [p.name for p in paths] == [f"{n}.png" for n in NAMES]
    assert all(_pixels(p).size > 0 for p in paths)
