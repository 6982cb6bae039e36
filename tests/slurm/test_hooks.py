"""``commsched slurm prolog|epilog`` against a live daemon (no Slurm needed: Slurm's environment is given),
and the rule that nothing fails a job: a daemon that is down gives a log line, exit 0, within the time-out."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from commsched.runtime.slurm.prolog import NOMINAL, SlurmJob, SlurmSettings, allocated_gpus, registration

TOKEN = "cs45-hooks-token"


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from commsched.cli.app import main; main()", *args]


def _hook(verb: str, env: dict[str, str], tmp: Path) -> tuple[int, str, float]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "COMMSCHED"))}
    t0 = time.monotonic()
    done = subprocess.run(
        _cli("slurm", verb), env={**base, **env}, capture_output=True, text=True, timeout=60, check=False
    )
    took = time.monotonic() - t0
    log = (tmp / "hooks.log").read_text() if (tmp / "hooks.log").exists() else done.stderr
    return done.returncode, log, took


def test_registration_rules() -> None:
    s = SlurmSettings(daemon="unix:/x", hosts={"n1": "h0", "n2": "h4"})
    job = SlurmJob(
        id="12",
        nodes=("n1", "n2"),
        gpus={"n1": (0, 1), "n2": (6, 7)},
        comment="commsched: compute_s=0.3 comm_bytes=2e8 priority=2",
    )
    assert registration(job, s) == {
        "id": "12",
        "gpu_ids": ["h0/gpu0", "h0/gpu1", "h4/gpu6", "h4/gpu7"],
        "compute_s": 0.3,
        "comm_bytes": 2e8,
        "priority": 2,
    }
    # GPUs known on one node only: the hosts, all their GPUs; the default model of the settings
    partial = SlurmJob(id="13", nodes=("n1", "n2"), gpus={"n1": (0,)})
    with_model = SlurmSettings(daemon="unix:/x", hosts={"n1": "h0"}, model="resnet50")
    assert registration(partial, with_model) == {"id": "13", "hosts": ["h0", "n2"], "model": "resnet50"}
    assert registration(SlurmJob(id="14", nodes=("n9",)), s) == {"id": "14", "hosts": ["n9"], **NOMINAL}


def test_allocated_gpus_of_scontrol() -> None:
    text = (
        "JobId=5 JobName=j.sh\n   JOB_GRES=gpu:4\n"
        "     Nodes=gpu[01-02] CPU_IDs=0-1 Mem=0 GRES=gpu:a100:2(IDX:0,3)\n"
        "     Nodes=gpu07 CPU_IDs=0 Mem=0 GRES=gpu:1(IDX:4-4)\n   TresPerNode=gres:gpu:2\n"
    )
    assert allocated_gpus(text) == {"gpu01": (0, 3), "gpu02": (0, 3), "gpu07": (4,)}
    assert allocated_gpus("     Nodes=vm CPU_IDs=0 Mem=0 GRES=\n") == {}


def test_daemon_down_exits_zero_within_the_timeout(tmp_path: Path) -> None:
    env = {
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_NODELIST": "vm",
        "SLURM_SCRIPT_CONTEXT": "prolog_slurmctld",
        "COMMSCHED_DAEMON": "http://127.0.0.1:18499",
        "COMMSCHED_SLURM_LOG": str(tmp_path / "hooks.log"),
        "COMMSCHED_SLURM_SCONTROL": "/nonexistent/scontrol",
    }
    rc, log, took = _hook("prolog", env, tmp_path)
    assert rc == 0 and "job 77: daemon unreachable" in log and "runs unscheduled" in log, log
    assert took < 10
    rc, log, _ = _hook("epilog", {**env, "SLURM_SCRIPT_CONTEXT": "epilog_slurmctld"}, tmp_path)
    assert rc == 0 and "job 77: daemon unreachable" in log.splitlines()[-1], log
    # not run by Slurm at all, or a bad host map: still 0, with the reason
    rc, log, _ = _hook("prolog", {**env, "SLURM_JOB_ID": "", "COMMSCHED_SLURM_HOSTS": "vm"}, tmp_path)
    assert rc == 0 and "not registered" in log.splitlines()[-1], log


@pytest.mark.slow
def test_prolog_epilog_with_a_daemon(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from commsched.runtime.http.localclient import LocalClient

    (tmp_path / "token").write_text(TOKEN)
    sock = tmp_path / "d.sock"
    daemon = subprocess.Popen(
        _cli(
            "daemon",
            "--db",
            str(tmp_path / "s.db"),
            "--listen",
            f"unix:{sock}",
            "--token-file",
            str(tmp_path / "token"),
            "--topology",
            "crux_testbed",
            "--heartbeat-timeout",
            "0",
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        scontrol = tmp_path / "scontrol"  # what Slurm's scontrol prints for the job
        scontrol.write_text("#!/bin/sh\necho '     Nodes=n[1-2] CPU_IDs=0 Mem=0 GRES=gpu:2(IDX:4-5)'\n")
        scontrol.chmod(0o755)
        env = {
            "SLURM_JOB_ID": "4242",
            "SLURM_JOB_NODELIST": "n[1-2]",
            "SLURM_SCRIPT_CONTEXT": "prolog_slurmctld",
            "SLURM_JOB_COMMENT": "model=bert",
            "COMMSCHED_DAEMON": f"unix:{sock}",
            "COMMSCHED_TOKEN_FILE": str(tmp_path / "token"),
            "COMMSCHED_SLURM_HOSTS": "n1=h0,n2=h4",
            "COMMSCHED_SLURM_LOG": str(tmp_path / "hooks.log"),
            "COMMSCHED_SLURM_SCONTROL": str(scontrol),
        }
        rc, log, _ = _hook("prolog", env, tmp_path)
        assert rc == 0 and "job 4242: registered" in log, log
        with LocalClient(f"unix:{sock}") as c:
            job = c.get("/v1/jobs/4242").json()
        assert job["gpus"] == ["h0/gpu4", "h0/gpu5", "h4/gpu4", "h4/gpu5"]
        assert job["model"] == "bert"
        # the second node's own Prolog (not the controller's) leaves it to the first node
        rc, log, _ = _hook(
            "prolog", {**env, "SLURM_SCRIPT_CONTEXT": "prolog", "SLURMD_NODENAME": "n2"}, tmp_path
        )
        assert rc == 0 and "registered by its first node (n1)" in log.splitlines()[-1]
        rc, log, _ = _hook("prolog", env, tmp_path)  # run twice: already there, no harm
        assert rc == 0 and "job 4242: already registered" in log.splitlines()[-1], log
        rc, log, _ = _hook("epilog", {**env, "SLURM_SCRIPT_CONTEXT": "epilog_slurmctld"}, tmp_path)
        assert rc == 0 and "job 4242: deregistered" in log.splitlines()[-1], log
        with LocalClient(f"unix:{sock}") as c:
            assert c.get("/v1/jobs/4242").status_code == 404
        rc, log, _ = _hook("epilog", {**env, "SLURM_SCRIPT_CONTEXT": "epilog_slurmctld"}, tmp_path)
        assert rc == 0 and "job 4242: not registered (nothing to drop)" in log.splitlines()[-1]
        # a model the daemon does not know: refused, logged, exit 0
        rc, log, _ = _hook(
            "prolog", {**env, "SLURM_JOB_ID": "4243", "SLURM_JOB_COMMENT": "model=nope"}, tmp_path
        )
        assert rc == 0 and "job 4243: refused (4" in log.splitlines()[-1] and "unscheduled" in log, log
    finally:
        daemon.terminate()
        daemon.wait(15)
