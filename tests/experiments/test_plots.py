"""Every picture of a comparison renders (matplotlib Agg) and shows the data it is given."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from commsched.api.comparing import compare_named as compare
from commsched.io.scenario import Scenario
from commsched.io.shipped import resolve_scenario
from commsched.sim.results.comparison import Comparison

pytest.importorskip("matplotlib")

from matplotlib import image as mpimg

from commsched.experiments.plots import write_plots

NAMES = ["utilization", "utilization_over_time", "jct_cdf", "link_intensity", "throughput_loss", "who_pays"]


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


def _figures(cmp: Comparison, scenario: Scenario) -> list[tuple[str, object]]:
    from commsched.experiments import plots
    from commsched.experiments.plot_links import link_intensity_figure, who_pays_figure

    plt = plots._plt()
    return [
        ("utilization", plots.utilization_figure(plt, cmp)),
        ("utilization_over_time", plots.over_time_figure(plt, cmp)),
        ("jct_cdf", plots.jct_cdf_figure(plt, cmp)),
        ("link_intensity", link_intensity_figure(plt, cmp, scenario.topology)),
        ("throughput_loss", plots.loss_figure(plt, cmp)),
        ("who_pays", who_pays_figure(plt, cmp)),
    ]


def test_every_figure_has_a_title_and_labelled_axes(demo: tuple[Scenario, Comparison]) -> None:
    """Read back from the figure objects: a title, and on every panel x and y labels, with units where
    the quantity has one."""
    import matplotlib.pyplot as plt

    scenario, cmp = demo
    units = {"utilization_over_time": "(h)", "jct_cdf": "(s)", "link_intensity": "(h)"}
    for name, fig in _figures(cmp, scenario):
        try:
            panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]  # type: ignore[attr-defined]
            suptitle = fig._suptitle.get_text() if fig._suptitle is not None else ""  # type: ignore[attr-defined]
            assert suptitle or all(ax.get_title() or ax.get_title(loc="left") for ax in panels), name
            assert (suptitle or panels[0].get_title()) and scenario.name in (
                suptitle or panels[0].get_title()
            )
            for ax in panels:
                assert ax.get_xlabel() and ax.get_ylabel(), name
            if name in units:
                assert units[name] in panels[-1].get_xlabel(), name
        finally:
            plt.close(fig)  # type: ignore[arg-type]


def test_the_link_figure_shows_the_busiest_links_by_their_endpoints(
    demo: tuple[Scenario, Comparison],
) -> None:
    import matplotlib.pyplot as plt

    from commsched.experiments.plot_links import TOP_LINKS, busiest_links, link_intensity_figure

    scenario, cmp = demo
    links = busiest_links(cmp)
    assert 0 < len(links) <= TOP_LINKS
    # independently: the highest time-mean utilisation of any link under any policy is the first row's
    mean = {}
    for r in cmp.results:
        for k, lid in enumerate(r.series.link_ids.tolist()):
            mean[lid] = max(mean.get(lid, 0.0), float(np.nanmean(r.series.link_utilization[:, k])))
    assert mean[links[0]] == max(mean.values())
    assert [mean[lid] for lid in links] == sorted((mean[lid] for lid in links), reverse=True)
    assert min(mean[lid] for lid in links) >= sorted(mean.values(), reverse=True)[len(links) - 1]
    fig = link_intensity_figure(plt, cmp, scenario.topology)
    try:
        panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
        assert len(panels) == len(cmp.results)
        topo = scenario.topology
        want = [f"{topo.links[lid].src} -> {topo.links[lid].dst}" for lid in links]
        for ax in panels:
            assert [t.get_text() for t in ax.get_yticklabels()] == want
    finally:
        plt.close(fig)


def test_a_zero_loss_bar_says_so(demo: tuple[Scenario, Comparison]) -> None:
    import matplotlib.pyplot as plt

    from commsched.experiments.plots import _plt, loss_figure
    from commsched.sim.results.comparison import throughput_loss

    _scenario, cmp = demo
    fig = loss_figure(_plt(), cmp)
    try:
        texts = [t.get_text() for t in fig.axes[0].texts]
        zero = sum(1 for r in cmp.results if max(throughput_loss(r), default=0.0) < 5e-4)
        assert texts.count("0 (no loss)") >= zero
        assert len(texts) == 2 * len(cmp.results)
    finally:
        plt.close(fig)


def test_the_who_pays_figure_lists_the_most_slowed_job_first(demo: tuple[Scenario, Comparison]) -> None:
    import matplotlib.pyplot as plt

    from commsched.experiments.plot_links import who_pays_figure
    from commsched.experiments.plots import _plt

    _scenario, cmp = demo
    base, other = cmp.results
    ratio = {
        j.id: j.mean_iteration_s / b.mean_iteration_s
        for j, b in zip(other.jobs, base.jobs, strict=True)
        if np.isfinite(j.mean_iteration_s) and np.isfinite(b.mean_iteration_s) and b.mean_iteration_s > 0
    }
    fig = who_pays_figure(_plt(), cmp)
    try:
        labels = [t.get_text().split(" ")[0] for t in fig.axes[0].get_yticklabels()]
        slowest = max(ratio, key=lambda k: ratio[k])
        if ratio[slowest] > 1.001:
            assert labels[0] == slowest
        fastest = min(ratio, key=lambda k: ratio[k])
        if ratio[fastest] < 0.999:
            assert labels[-1] == fastest
    finally:
        plt.close(fig)
