"""Debian's Prometheus scraping a daemon and an enforcing agent; the Grafana dashboard's queries (root).

Everything runs in a network namespace of the test's own (``cs45p<pid>``, loopback only): a daemon
(``crux_testbed``, ``crux-full``) on 127.0.0.1:18455, an enforcing agent of host ``h0`` with its
metrics on 127.0.0.1:18456, and ``prometheus`` (127.0.0.1:18457) scraping both every second. Two
jobs are registered; Prometheus's HTTP query API must then return each job's class and DSCP and every
planned link's load exactly as the daemon's own decision says, and the agent's version and per-job
series. (The metrics' ``job`` label meets Prometheus's own target label ``job``: Prometheus keeps the
metric's as ``exported_job``, which the queries here and the dashboard's use.) Every query of
``docs/grafana/commsched-dashboard.json`` must name only metrics the two exporters export (the
families of their ``/metrics``, with the ``_total``/``_bucket``/``_sum``/``_count`` series of
counters and histograms).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "commsched-dashboard.json"
DAEMON, AGENT, PROM = 18455, 18456, 18457
TOKEN = "cs45-prometheus-token"

_CLIENT = """
import json, sys, urllib.request
url, method, body, token = sys.argv[1:5]
req = urllib.request.Request(url, method=method, data=body.encode() if body else None)
if body: req.add_header("Content-Type", "application/json")
if token: req.add_header("Authorization", "Bearer " + token)
try:
    with urllib.request.urlopen(req, timeout=10) as r: print(r.status); print(r.read().decode())
except urllib.error.HTTPError as e: print(e.code); print(e.read().decode())
except OSError as e: print(0); print(e)
"""


def dashboard_queries(path: Path = DASHBOARD) -> list[str]:
    """Every ``expr`` of every panel of the dashboard."""
    d = json.loads(path.read_text())
    return [t["expr"] for p in d["panels"] for t in p.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bcommsched_[a-z0-9_]+", expr))


def exported_names(text: str) -> set[str]:
    """The series names of a scrape's families (``# TYPE`` lines: empty families count too)."""
    out: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()[:4]
            out.add(name)
            if kind == "counter":
                out.add(name + "_total" if not name.endswith("_total") else name)
            if kind == "histogram":
                out |= {name + s for s in ("_bucket", "_sum", "_count")}
    return out


def test_dashboard_parses_and_queries_commsched_metrics() -> None:
    d = json.loads(DASHBOARD.read_text())
    assert d["panels"] and d["title"]
    queries = dashboard_queries()
    assert len(queries) >= 20
    assert all(metric_names(q) for q in queries), [q for q in queries if not metric_names(q)]


def _ns(ns: str, *argv: str) -> list[str]:
    return ["nsenter", f"--net=/run/netns/{ns}", *argv]


def _http(ns: str, url: str, method: str = "GET", body: Any = None, token: str = "") -> tuple[int, str]:
    done = subprocess.run(
        _ns(
            ns,
            sys.executable,
            "-c",
            _CLIENT,
            url,
            method,
            json.dumps(body) if body is not None else "",
            token,
        ),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    status, _, text = done.stdout.partition("\n")
    return int(status or 0), text


def _json(ns: str, url: str, **kw: Any) -> Any:
    status, text = _http(ns, url, **kw)
    assert 200 <= status < 300, (url, status, text)
    return json.loads(text)


def _wait(cond: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(AssertionError, ValueError, KeyError):
            got = cond()
            if got:
                return got
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout} s")


def _query(ns: str, q: str) -> list[dict[str, Any]]:
    import urllib.parse

    out = _json(ns, f"http://127.0.0.1:{PROM}/api/v1/query?query={urllib.parse.quote(q)}")
    assert out["status"] == "success", out
    return list(out["data"]["result"])


def _stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(15)
        if p.poll() is None:
            p.kill()
            p.wait()


def _need() -> None:
    from tests.slurm.cluster import missing

    why = missing()
    if why is None and shutil.which("prometheus") is None:
        why = "needs 'prometheus' (Debian package prometheus: make sysdeps)"
    if why is not None:
        pytest.skip(why)


@pytest.mark.slow
def test_prometheus_reads_the_daemons_decision(tmp_path: Path) -> None:
    _need()
    ns = f"cs45p{os.getpid() % 100000}"
    (tmp_path / "token").write_text(TOKEN + "\n")
    cli = [sys.executable, "-c", "from commsched.cli.app import main; main()"]
    procs: list[subprocess.Popen[bytes]] = []
    made = False
    try:
        subprocess.run(["ip", "netns", "add", ns], check=True)
        made = True
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)

        def start(name: str, argv: list[str]) -> None:
            with open(tmp_path / f"{name}.log", "ab") as log:
                procs.append(subprocess.Popen(_ns(ns, *argv), stdout=log, stderr=subprocess.STDOUT))

        start(
            "daemon",
            [
                *cli,
                "daemon",
                "--db",
                str(tmp_path / "s.db"),
                "--listen",
                f"127.0.0.1:{DAEMON}",
                "--token-file",
                str(tmp_path / "token"),
                "--topology",
                "crux_testbed",
                "--policy",
                "crux-full",
                "--profiling-window",
                "0",
                "--heartbeat-timeout",
                "0",
            ],
        )
        _wait(lambda: _http(ns, f"http://127.0.0.1:{DAEMON}/health")[0] == 200, 30, "the daemon")
        start(
            "agent",
            [
                *cli,
                "agent",
                "--daemon",
                f"http://127.0.0.1:{DAEMON}",
                "--host",
                "h0",
                "--token-file",
                str(tmp_path / "token"),
                "--listen",
                f"unix:{tmp_path}/agent.sock",
                "--state",
                str(tmp_path / "agent.json"),
                "--ledger",
                str(tmp_path / "ledger.json"),
                "--enforce",
                "--metrics-listen",
                f"127.0.0.1:{AGENT}",
            ],
        )
        _wait(lambda: _http(ns, f"http://127.0.0.1:{AGENT}/metrics")[0] == 200, 30, "the agent's metrics")
        for body in (
            {"id": "bert", "hosts": ["h0", "h4"], "model": "bert"},
            {"id": "gpt", "hosts": ["h1", "h5"], "model": "gpt3"},
        ):
            _json(ns, f"http://127.0.0.1:{DAEMON}/v1/jobs", method="POST", body=body, token=TOKEN)
        (tmp_path / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            f"  - job_name: commsched-daemon\n    static_configs: [{{targets: ['127.0.0.1:{DAEMON}']}}]\n"
            f"  - job_name: commsched-agents\n    static_configs: [{{targets: ['127.0.0.1:{AGENT}']}}]\n"
        )
        start(
            "prometheus",
            [
                "prometheus",
                f"--config.file={tmp_path}/prometheus.yml",
                f"--storage.tsdb.path={tmp_path}/tsdb",
                f"--web.listen-address=127.0.0.1:{PROM}",
            ],
        )
        decision = _json(ns, f"http://127.0.0.1:{DAEMON}/v1/decisions/latest")
        version = decision["version"]
        rows = _wait(
            lambda: (
                len(_query(ns, "commsched_daemon_job_priority_class")) == 2
                and _query(ns, f"commsched_agent_decision_version == {version}")
                and _query(ns, "commsched_daemon_job_priority_class")
            ),
            60,
            "Prometheus's scrapes",
        )
        got = {r["metric"]["exported_job"]: int(float(r["value"][1])) for r in rows}
        assert got == {j: int(v["class"]) for j, v in decision["jobs"].items()}, (got, decision["jobs"])
        dscp = {
            r["metric"]["exported_job"]: int(float(r["value"][1]))
            for r in _query(ns, "commsched_daemon_job_dscp")
        }
        assert dscp == {j: int(v["dscp"]) for j, v in decision["jobs"].items()}
        loads = {
            (r["metric"]["link"], r["metric"]["src"], r["metric"]["dst"]): float(r["value"][1])
            for r in _query(ns, "commsched_daemon_link_planned_bytes_per_iteration")
        }
        want = {
            (str(x["link"]), x["src"], x["dst"]): float(x["bytes_per_iter"]) for x in decision["link_load"]
        }
        assert want and loads.keys() == want.keys()
        assert all(abs(loads[k] - want[k]) <= 1e-6 * want[k] for k in want), (loads, want)
        per_job = _query(ns, "commsched_agent_job_processes")
        assert {r["metric"]["exported_job"] for r in per_job} == {
            "bert"
        }  # h0's job only, decided, no process yet

        # every query of the dashboard names metrics the two exporters export
        exported = set()
        for port in (DAEMON, AGENT):
            status, text = _http(ns, f"http://127.0.0.1:{port}/metrics")
            assert status == 200
            exported |= exported_names(text)
        for q in dashboard_queries():
            assert metric_names(q) <= exported, (q, metric_names(q) - exported)
    finally:
        _stop_all(procs)
        if made:
            subprocess.run(["ip", "netns", "del", ns], check=False)
