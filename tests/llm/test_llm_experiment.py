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
    # llama65b on 32 GPUs = 4 whole hosts: a ring over them crosses hosts 4 times per step,
    # 2 (n - 1) steps of S / n each
    s = resolve_model("llama-65b@h200").sync_bytes
    assert flat["llama65b"] == pytest.approx((0.0, 0.0, 4 * 2 * 31 * s / 32, 0.0), rel=1e-9)
    # grouped: no TP on the fabric, EP only for the MoE job, PP only for the pipelined one
    assert all(v[0] == 0.0 for v in grouped.values())
    assert grouped["mixtral"][3] > 0 and grouped["gpt13b"][3] == 0 and grouped["llama65b"][1] > 0
    pytest.importorskip("matplotlib")
    paths = write_llm_plots(cmp, tmp_path)
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
