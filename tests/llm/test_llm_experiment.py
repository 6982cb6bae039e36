"""Grouped LLM jobs against the same jobs flattened to data parallelism (the shipped llm-h200 mix)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from commsched.api.llm_groups import grouped_vs_flat, write_llm_plots
from commsched.io.shipped import resolve_scenario
from commsched.workload.grouped_jobs import resolve_model


def test_flattened_jobs_put_their_whole_ring_all_reduce_on_the_fabric(tmp_path: Path) -> None:
    sc = replace(resolve_scenario("llm-h200"), horizon_s=6.0)
    cmp = grouped_vs_flat(sc, ["crux-full"])
    flat = dict(cmp.row("flat", "crux-full").fabric_bytes)
    grouped = dict(cmp.row("grouped", "crux-full").fabric_bytes)
    # llama65b on 48 GPUs = 6 whole hosts: a ring over them crosses hosts 6 times per step,
    # 2 (n - 1) steps of S / n each
    s = resolve_model("llama-65b@h200").sync_bytes
    assert flat["llama65b"] == pytest.approx((0.0, 0.0, 6 * 2 * 47 * s / 48, 0.0), rel=1e-9)
    # grouped: no TP on the fabric, EP only for the MoE job, PP only for the pipelined one
    assert all(v[0] == 0.0 for v in grouped.values())
    assert grouped["mixtral"][3] > 0 and grouped["gpt13b"][3] == 0 and grouped["llama65b"][1] > 0
    pytest.importorskip("matplotlib")
    paths = write_llm_plots(cmp, tmp_path)
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)


def test_jobs_of_the_shipped_cluster_contend_on_shared_uplinks() -> None:
    """mixtral and gpt13b share leaf 1's uplinks, llama65b and gpt13b leaf 3's: under ECMP hashing the
    sharing jobs run slower than alone; Sincronia's order lets gpt13b go at its own pace and slows the
    others; vClos's reservations keep every job on links of its own."""
    from commsched.api.runner import simulate_scenario

    sc = resolve_scenario("llm-h200")
    runs = {
        p: {j.id: j for j in simulate_scenario(sc, policy=p).jobs}
        for p in ("ecmp-fair", "sincronia", "vclos")
    }
    ecmp, sinc, vclos = runs["ecmp-fair"], runs["sincronia"], runs["vclos"]
    sharing = ("mixtral", "llama65b", "gpt13b")
    # against each job's standalone time on its own routes (contention only; ``slowdown`` is against the
    # ideal, which also counts ECMP's own collisions)
    assert all(ecmp[k].shared_links and ecmp[k].standalone_slowdown > 1.05 for k in sharing)
    assert sinc["gpt13b"].standalone_slowdown == pytest.approx(1.0, abs=1e-3)
    assert sinc["mixtral"].standalone_slowdown > 1.3 and sinc["llama65b"].standalone_slowdown > 1.3
    assert not any(j.shared_links for j in vclos.values())
    assert all(j.standalone_slowdown == pytest.approx(1.0, abs=1e-3) for j in vclos.values())
    assert all(j.slowdown >= j.standalone_slowdown * (1 - 1e-9) for r in runs.values() for j in r.values()
               if j.iterations > 0)  # fmt: skip
    # the jobs inside one host never meet another
    assert not any(r[k].shared_links for r in runs.values() for k in ("gpt350m", "bert"))
