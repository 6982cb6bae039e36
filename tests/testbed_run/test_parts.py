"""The testbed runner's parts without root: layouts, twin topology, means, the job process on loopback."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from commsched.experiments.testbed_run import measured_means
from commsched.experiments.testbed_run.layout import job_layouts
from commsched.experiments.testbed_run.twin import GOODPUT, TwinFacts, simulate_twin, twin_topology
from commsched.io.scenario import scenario_from_text
from commsched.io.shipped import shipped_text
from commsched.runtime.agent.ports import answer, parse_probe_table
from commsched.runtime.jobside.agentpolicy import AgentPolicy
from commsched.runtime.jobside.jobproc import run
from commsched.runtime.launch.jobs import DPORT_BASE
from commsched.runtime.launch.session import PolicyRun
from commsched.topology import LinkId


@pytest.fixture(scope="module")
def fig19() -> Any:
    return scenario_from_text(shipped_text("crux-fig19"), source="crux-fig19")


def _ips(topo: Any) -> dict[str, str]:
    """``h3/nic1`` -> ``10.0.3.2`` (the testbed's addressing)."""
    out = {}
    for gpu in topo.gpus:
        nic = str(topo.nic_of(gpu))
        host, _, idx = nic.partition("/nic")
        out[nic] = f"10.0.{int(host[1:])}.{int(idx) + 1}"
    return out


def test_layout_of_fig19(fig19: Any) -> None:
    jobs = {j.id: j for j in job_layouts(fig19, fig19.topology, _ips(fig19.topology))}
    gpt = jobs["gpt"]
    assert gpt.hosts == ("h0", "h4", "h1", "h5") and gpt.rails == 8
    # rail r of host k listens on the NIC of GPU k*8 + r; two rails share each NIC, on two ports
    assert [(x.nic, x.port) for x in gpt.listeners[:4]] == [
        ("h0/nic0", DPORT_BASE),
        ("h0/nic0", DPORT_BASE + 1),
        ("h0/nic1", DPORT_BASE),
        ("h0/nic1", DPORT_BASE + 1),
    ]
    ring = gpt.ring()
    assert len(ring) == 8 * 4  # one connection per rail and host
    assert all(s.rail == d.rail and d.host_index == (s.host_index + 1) % 4 for s, d in ring)
    # every listener of every job has its own (address, port)
    everyone = [(x.ip, x.port) for j in jobs.values() for x in j.listeners]
    assert len(everyone) == len(set(everyone))
    assert jobs["bert3"].rails == 4 and jobs["bert3"].hosts == ("h2", "h6")


def test_twin_topology_goodput(fig19: Any) -> None:
    topo = fig19.topology
    link = 5
    twin = twin_topology(topo, {LinkId(link): 1e8})
    assert twin.capacity_bps[link] == pytest.approx(1e8 * 1448 / 1514)
    assert pytest.approx(0.9564, abs=1e-4) == GOODPUT
    others = [i for i in range(len(topo.links)) if i != link]
    assert np.array_equal(twin.capacity_bps[others], topo.capacity_bps[others])


def test_measured_means_after_warmup() -> None:
    its = [(10.0 + i, 10.5 + i) for i in range(10)]  # 0.5 s each
    slow = [(10.0 + i, 10.9 + i) for i in range(10)]
    run_ = PolicyRun(
        policy="p",
        start=10.0,
        outputs={"a": [{"iterations": its}, {"iterations": slow}]},
        decision={},
        paths={},
    )
    m = measured_means(run_, warmup_s=5.0)["a"]
    assert m["mean"] == pytest.approx((0.5 + 0.9) / 2) and m["iterations"] == 5


def test_twin_follows_the_given_paths_and_classes(fig19: Any) -> None:
    """Forcing two jobs onto the same uplink path slows the twin down compared with the policy's own."""
    topo = fig19.topology
    emulated = {lk.id: lk.capacity_bps * 0.0025 for lk in topo.links if lk.kind.value in ("access", "fabric")}
    base, unknown = simulate_twin(
        fig19, policy="crux-full", rate_scale=0.0025, emulated=emulated,
        facts=TwinFacts(paths={}, classes={}), warmup_s=1.0, window_s=4.0,
    )  # fmt: skip
    assert unknown == 0
    gpt = {str(j.id): j for j in base.jobs}["gpt"]
    assert gpt.mean_iteration_s >= 0.08
    bad = simulate_twin(
        fig19, policy="crux-full", rate_scale=0.0025, emulated=emulated,
        facts=TwinFacts(paths={("gpt", "h0/gpu0", "h4/gpu0"): (1, 2, 3)}, classes={"gpt": 7, "bert1": 0}),
        warmup_s=1.0, window_s=4.0,
    )[1]  # fmt: skip
    assert bad == 1  # a path the model does not have is counted, not used


def test_probe_table_per_destination_port() -> None:
    table = parse_probe_table(
        {
            "entries": [
                {"src_ip": "10.0.0.1", "dst_ip": "10.0.1.1", "path": [4, 9], "sport": 20001, "dport": 15201},
                {"src_ip": "10.0.0.1", "dst_ip": "10.0.1.1", "path": [4, 9], "sport": 20007, "dport": 15202},
            ]
        }
    )
    view = {
        "format": 1, "version": 2, "policy": "crux-full", "host": "h0",
        "jobs": {"a": {"rank": 0, "class": 0, "dscp": 46, "tos": 184, "gpus": ["h0/gpu0", "h1/gpu0"],
                       "hosts": ["h0", "h1"], "compute_s": 0.1, "comm_bytes": 1e6}},
        "connections": [
            {"job": "a", "src_rank": 0, "dst_rank": 1, "src": "h0/gpu0", "dst": "h1/gpu0",
             "src_nic": "h0/nic0", "dst_nic": "h1/nic0", "path_index": 0, "n_paths": 1,
             "path": ["h0/nic0", "tor0", "h1/nic0"],
             "links": [4, 9], "src_port": 49200}
        ],
        "nic_ips": {"h0/nic0": "10.0.0.1", "h1/nic0": "10.0.1.1"},
    }  # fmt: skip
    answers = [answer(view, table, "a", 0, 1, dport=d) for d in (15201, 15202, 15203)]
    ports = [a.src_port for a in answers if a is not None]
    assert ports == [20001, 20007, 49200]  # unknown port: the hash model's


def test_agent_policy_without_agent_is_unmarked() -> None:
    pol = AgentPolicy(socket_path=None, job="j", rail=1, rails=2, dports=[1, 2])
    m = pol.marking("j.rail1", 0, 1)
    assert (m.source_port, m.dscp) == (None, 0)
    pol = AgentPolicy(socket_path="/nonexistent/agent.sock", job="j", rail=1, rails=2, dports=[1, 2])
    assert pol.marking("j.rail1", 0, 1).dscp == 0  # agent away: nothing known yet


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def test_job_processes_on_loopback_stop_together(tmp_path: Path) -> None:
    """Two hosts x two rails: same iteration count on both, iterations last at least the compute."""
    ports = _free_ports(4)
    listen = [[["127.0.0.1", ports[2 * k + r]] for k in range(2)] for r in range(2)]
    results: dict[int, dict[str, Any]] = {}

    def host(k: int) -> None:
        spec = {
            "job": "t", "host_index": k, "hosts": 2, "rails": 2, "compute_s": 0.02, "overlap": 0.5,
            "rail_bytes": 40_000, "listen": listen, "agent": None, "ready": str(tmp_path / f"{k}.ready"),
            "go": str(tmp_path / "go"), "out": str(tmp_path / f"{k}.json"), "timeout_s": 20.0,
        }  # fmt: skip
        results[k] = run(spec)

    threads = [threading.Thread(target=host, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while not all((tmp_path / f"{k}.ready").exists() for k in range(2)) and time.monotonic() < deadline:
        time.sleep(0.02)
    now = time.time()
    (tmp_path / "go").write_text(json.dumps({"start": now + 0.1, "end_at": now + 1.0}))
    for t in threads:
        t.join(timeout=30)
    a, b = results[0], results[1]
    assert not a["errors"] and not b["errors"]
    assert len(a["iterations"]) == len(b["iterations"]) >= 3
    assert all(e - s >= 0.02 for s, e in a["iterations"])
    assert a["iterations"][-1][0] >= now + 1.0 - 0.2  # ran until the end signal
    assert {c["rail"] for c in a["connections"]} == {0, 1}


def test_vclos_testbed_scenario_is_the_papers_testbed() -> None:
    sc = scenario_from_text(shipped_text("vclos-testbed"), source="vclos-testbed")
    topo = sc.topology
    assert len(topo.hosts) == 8 and topo.n_gpus == 32
    nics = {str(topo.nic_of(g)) for g in topo.gpus}
    assert len(nics) == 32  # one NIC per GPU
    assert topo.params["ocs"] is True and topo.params["leaves"] == 2 and topo.params["spines"] == 2
    jobs = job_layouts(sc, topo, _ips(topo))
    assert {j.id for j in jobs} == {"vgg16", "resnet101", "resnet50", "bert"}
    assert all(len({topo.host_of(g).id for g in j.gpus}) >= 2 for j in jobs)  # every job crosses hosts


def test_twin_step_latency_lengthens_communication(fig19: Any) -> None:
    topo = fig19.topology
    emulated = {lk.id: lk.capacity_bps * 0.0025 for lk in topo.links if lk.kind.value in ("access", "fabric")}
    paths = {
        ("gpt", "h0/gpu0", "h4/gpu0"): tuple(
            int(x) for x in topo.equal_cost_paths("h0/nic0", "h4/nic0")[0].links
        )
    }
    its = []
    for alpha in (None, 0.02):
        res, unknown = simulate_twin(
            fig19, policy="ecmp-fair", rate_scale=0.0025, emulated=emulated,
            facts=TwinFacts(paths=paths, classes={}, step_latency_s=alpha), warmup_s=1.0, window_s=3.0,
        )  # fmt: skip
        assert unknown == 0
        its.append({str(j.id): j.mean_iteration_s for j in res.jobs}["gpt"])
    # GPT's 6 inter-host steps each cost 20 ms more, after the compute overlap hides part of it
    assert its[1] > its[0] + 0.05


def test_the_twin_gap_is_measured_over_simulated_on_one_time_scale() -> None:
    """A job measured 10 % slower than its twin reports a gap of +0.10, times on the cluster's scale."""
    from types import SimpleNamespace

    from commsched.experiments.testbed_run import RunOptions
    from commsched.experiments.testbed_run.report import Twins, library_rows
    from commsched.runtime.launch.jobs import JobLayout

    # time dilation 2: the testbed's iterations take 2.2 s, the twin's 2.0 s; both are 1.1 / 1.0 s on the
    # cluster's scale. Iterations before the profiling window (1 s) are not measured.
    its = [(0.0, 0.5), *((1.0 + 2.2 * i, 1.0 + 2.2 * (i + 1)) for i in range(4))]
    run = PolicyRun(
        policy="p",
        start=0.0,
        outputs={"a": [{"iterations": its, "connections": [{"dscp": 10}]}]},
        decision={"jobs": {"a": {"class": 1, "dscp": 10}}},
        paths={},
    )
    job = JobLayout(id="a", hosts=("h0",), rails=1, gpus=(), compute_s=0.5, overlap=1.0, sync_bytes=1e6,
                    model=None, listeners=())  # fmt: skip
    opts = RunOptions(policies=("p",), name="t", rate_scale=1.0, profiling_window_s=1.0, time_scale=2.0)
    twin = SimpleNamespace(jobs=[SimpleNamespace(id="a", mean_iteration_s=2.0)])
    tb = SimpleNamespace(scale_bytes=int)
    twins = Twins(ideal=twin, calibrated=None, used=twin, unknown_paths=0, alpha=None)
    row = library_rows(tb, [job], run, opts=opts, twins=twins)["a"]
    assert row["measured_iteration_s"] == pytest.approx(1.1)
    assert row["simulated_iteration_s"] == pytest.approx(1.0)
    assert row["gap"] == pytest.approx(0.1)
    assert row["iterations_measured"] == 4 and row["dscp_on_sockets"] == [10]
