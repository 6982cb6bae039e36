"""The Lingjun loader on small files written in the real schema (job.csv, worker.csv, topo.csv)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from commsched.errors import InputError
from commsched.workload.traces import LINGJUN, load_lingjun_trace, to_job_specs
from tests.paths import SHARED_DATA

JOB_HEADER = [
    "id", "uid", "job_name", "kind", "namespace", "model", "status", "reason", "reason_code", "priority",
    "gmt_job_submitted", "gmt_job_running", "gmt_job_stopped", "gmt_job_finished",
]  # fmt: skip
JOBS = [
    # name, model, status, submitted, running, stopped, finished
    ("dlc1", "gpt-13b", "Succeeded", "2023/7/15 02:00", "2023/7/15 02:01", "", "2023/7/15 04:01"),
    ("dlc2", "resnet", "Succeeded", "2023/7/15 02:10", "2023/7/15 02:10", "", "2023/7/15 02:10"),
    ("dlc3", "mystery", "Failed", "2023/7/15 03:00", "2023/7/15 03:05", "2023/7/15 03:35", ""),
    ("dlc4", "bert", "Failed", "2023/7/15 03:30", "", "2023/7/15 03:31", ""),  # never ran
    ("dlc5", "llama_30b", "Running", "2023/7/15 04:00", "2023/7/15 04:00", "", ""),  # never ended
    ("dlc6", "cognitive", "Succeeded", "2023/7/15 05:00", "2023/7/15 05:02", "", "2023/7/15 05:30"),
    ("dlc7", "unknown", "Succeeded", "2023/7/15 01:00", "2023/7/15 01:30", "", "2023/7/15 02:30"),
]
WORKERS = [
    ("dlc1", "master", "ipA", {"cpu": "96", "memory": "1600Gi", "nvidia.com/gpu": "8"}),
    ("dlc1", "worker", "ipB", {"cpu": "96", "nvidia.com/gpu": 8, "koordinator.sh/rdma": "100"}),
    ("dlc2", "worker", "ipA", {"nvidia.com/gpu": "1"}),
    ("dlc3", "worker", "ipZ", {"admirl.ai/gpu": "4"}),
    ("dlc4", "worker", "ipA", {"nvidia.com/gpu": "8"}),
    ("dlc5", "worker", "ipB", {"nvidia.com/gpu": "8"}),
    ("dlc6", "worker", "ipC", {"cpu": "8"}),  # no GPUs -> skipped
    ("dlc7", "worker", "ipC", {"nvidia.com/gpu": "2"}),
]


def write_trace(d: Path, *, jobs: list[tuple[str, ...]] = JOBS, job_header: list[str] = JOB_HEADER) -> Path:
    with (d / "job.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(job_header)
        for i, (name, model, status, sub, run, stop, fin) in enumerate(jobs):
            row = {"id": str(i), "uid": f"u{i}", "job_name": name, "kind": "PyTorchJob", "namespace": "ns",
                   "model": model, "status": status, "priority": "1", "gmt_job_submitted": sub,
                   "gmt_job_running": run, "gmt_job_stopped": stop, "gmt_job_finished": fin}  # fmt: skip
            w.writerow([row.get(c, "") for c in job_header])
    with (d / "worker.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "job_name", "worker_name", "replica_type", "host_ip", "gmt_created", "RES"])
        for i, (name, kind, ip, res) in enumerate(WORKERS):
            w.writerow([i, name, f"{name}-{kind}-{i}", kind, ip, "2023/7/15 01:00", json.dumps(res)])
    (d / "topo.csv").write_text("ip,DSW,PSW,ASW\nipA,G6,P8,S1\nipB,G6,P8,S2\nipC,G6,P10,S1\n")
    return d


def test_loader_derives_jobs(tmp_path: Path) -> None:
    d = write_trace(tmp_path)
    t = load_lingjun_trace(d / "job.csv", d / "worker.csv", d / "topo.csv")
    by_id = {j.id: j for j in t.jobs}
    assert list(by_id) == ["dlc7", "dlc1", "dlc2", "dlc3"]  # sorted by arrival; dlc7 submitted first
    assert by_id["dlc7"].arrival_s == 0.0
    j1 = by_id["dlc1"]
    assert (j1.gpus, j1.model, j1.source, j1.duration_s, j1.hosts) == (
        16,
        "gpt3-crux",
        "gpt-13b",
        7200.0,
        ("ipA", "ipB"),
    )
    assert j1.arrival_s == 3600.0
    assert by_id["dlc2"].duration_s == 30.0  # 0-minute run -> half the resolution
    assert by_id["dlc3"].duration_s == 1800.0  # stopped time when finished is empty
    assert by_id["dlc3"].hosts == ()  # ipZ not in topo.csv -> placement dropped
    assert by_id["dlc3"].model == LINGJUN.default and by_id["dlc7"].model == LINGJUN.default
    notes = "\n".join(t.notes)
    assert "skipped 1 job(s): never ran" in notes
    assert "skipped 1 job(s): never ended" in notes
    assert "skipped 1 job(s): no GPU workers" in notes
    assert "1 job(s) had hosts not in topo.csv" in notes
    assert "2 job(s) with unmapped model labels -> bert-base: mystery (1), unknown (1)" in notes
    specs = to_job_specs(t, host_ids={"ipA": "h0", "ipB": "h1", "ipC": "h2"})
    assert specs[1].hosts == ("h0", "h1") and specs[1].profile.name == "gpt3-crux"
    assert specs[1].duration_s == 7200.0


def test_without_topo_keeps_all_placements(tmp_path: Path) -> None:
    d = write_trace(tmp_path)
    t = load_lingjun_trace(d / "job.csv", d / "worker.csv")
    assert {j.id: j.hosts for j in t.jobs}["dlc3"] == ("ipZ",)


def test_missing_column_names_file_line_and_expected(tmp_path: Path) -> None:
    d = write_trace(tmp_path, job_header=[c for c in JOB_HEADER if c != "gmt_job_running"])
    with pytest.raises(InputError) as err:
        load_lingjun_trace(d / "job.csv", d / "worker.csv")
    msg = str(err.value)
    assert f"{d / 'job.csv'}:1" in msg and "gmt_job_running" in msg and "expected columns job_name" in msg


def test_missing_end_columns(tmp_path: Path) -> None:
    header = [c for c in JOB_HEADER if c not in ("gmt_job_finished", "gmt_job_stopped")]
    d = write_trace(tmp_path, job_header=header)
    with pytest.raises(InputError, match="no end-time column"):
        load_lingjun_trace(d / "job.csv", d / "worker.csv")


def test_bad_timestamp_names_line_and_column(tmp_path: Path) -> None:
    jobs = [*JOBS[:1], ("bad", "gpt", "Succeeded", "15.7.2023", "2023/7/15 02:01", "", "2023/7/15 02:02")]
    d = write_trace(tmp_path, jobs=jobs)
    with pytest.raises(InputError) as err:
        load_lingjun_trace(d / "job.csv", d / "worker.csv")
    assert f"{d / 'job.csv'}:3: gmt_job_submitted" in str(err.value)


def test_bad_res_json(tmp_path: Path) -> None:
    d = write_trace(tmp_path)
    (d / "worker.csv").write_text("job_name,host_ip,RES\ndlc1,ipA,{not json\n")
    with pytest.raises(InputError, match=r"worker\.csv:2: RES"):
        load_lingjun_trace(d / "job.csv", d / "worker.csv")


def test_worker_missing_columns(tmp_path: Path) -> None:
    d = write_trace(tmp_path)
    (d / "worker.csv").write_text("job_name,RES\n")
    with pytest.raises(InputError, match="host_ip"):
        load_lingjun_trace(d / "job.csv", d / "worker.csv")


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_lingjun_trace(tmp_path / "nope.csv", tmp_path / "nope2.csv")


def test_real_topo_joins(tmp_path: Path) -> None:
    topo = SHARED_DATA / "alibaba-lingjun-2023" / "topo.csv"
    if not topo.exists():
        pytest.skip("Lingjun topo.csv not present")
    ip = topo.read_text().splitlines()[1].split(",")[0]
    d = write_trace(tmp_path)
    (d / "worker.csv").write_text(f'job_name,host_ip,RES\ndlc1,{ip},"{{""nvidia.com/gpu"": ""8""}}"\n')
    t = load_lingjun_trace(d / "job.csv", d / "worker.csv", topo)
    assert [(j.id, j.hosts) for j in t.jobs] == [("dlc1", (ip,))]
