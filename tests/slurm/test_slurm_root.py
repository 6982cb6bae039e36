"""Slurm jobs scheduled without any change to them, on a real Slurm (root; skipped otherwise).

The fixture (:mod:`tests.slurm.cluster`) runs munge, slurmctld and slurmd from Debian's packages in a
network namespace of the test's own, with ``PrologSlurmctld``/``EpilogSlurmctld`` calling ``commsched
slurm prolog|epilog``; a daemon (Unix socket) decides for ``crux_testbed`` and an enforcing agent with
``--slurm`` runs in the namespace as the node's host ``h0``. The jobs are ``sbatch`` scripts running
the gloo DDP example with ``srun`` (two ranks each), which know nothing of commsched.

What is checked, each against Slurm's own word or the kernel's counters:

* two jobs at once: both registered under their Slurm ids with host ``h0`` and the GPUs Slurm
  allocated them (``scontrol show job -d``), every data byte of each on loopback at the DSCP the
  daemon decided for it (nftables counters of a table of the test's own, by the connection mark the
  agent gave the job), both gone from the daemon within 10 s of Slurm saying they ended;
* ``scancel`` of a running job and a job that exits 3: both deregistered; a job cancelled the moment it
  is registered (its hooks possibly killed by Slurm): dropped within the heartbeat time-out;
* the daemon stopped during a job and the agent killed and restarted: the job completes, the restarted
  agent keeps its packets at its DSCP, and a job submitted while the daemon is down runs unscheduled;
* the finished jobs as a ``trace: {kind: slurm}``: their ids, GPUs and durations come back.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.slurm.cluster import SlurmCluster, missing

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ddp_gloo_train.py"
TOKEN = "cs45-slurm-test-token"

JOB = """#!/bin/bash
#SBATCH --ntasks=2 --gres=gpu:2
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((18460 + SLURM_JOB_ID % 30))
srun /bin/sh -c 'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID exec {py} {ex} \\
    --iterations {n} --compute-s 0.2 --dim 256'
"""


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from commsched.cli.app import main; main()", *args]


class _Daemon:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.sock = work / "daemon.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.sock.unlink(missing_ok=True)
        argv = _cli(
            "daemon",
            "--db",
            str(self.work / "state.db"),
            "--listen",
            f"unix:{self.sock}",
            "--token-file",
            str(self.work / "token"),
            "--topology",
            "crux_testbed",
            "--policy",
            "crux-full",
            "--profiling-window",
            "0",
        )
        with open(self.work / "daemon.log", "ab") as log:  # the child keeps its own copy
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        _wait(lambda: self.sock.exists() and self.get("/health") is not None, 30, "the daemon")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(15)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def get(self, path: str) -> Any:
        from commsched.runtime.http.localclient import LocalClient, LocalHTTPError

        try:
            with LocalClient(f"unix:{self.sock}", timeout=5.0) as c:
                r = c.get(path)
        except LocalHTTPError:
            return None
        return r.json() if r.status_code == 200 else None

    def jobs(self) -> dict[str, Any]:
        return {j["id"]: j for j in self.get("/v1/jobs") or []}


class _Agent:
    def __init__(self, work: Path, cluster: SlurmCluster, daemon: _Daemon) -> None:
        self.work, self.cluster, self.daemon = work, cluster, daemon
        self.sock = work / "agent.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.sock.unlink(missing_ok=True)
        argv = _cli(
            "agent",
            "--daemon",
            f"unix:{self.daemon.sock}",
            "--host",
            "h0",
            "--token-file",
            str(self.work / "token"),
            "--listen",
            f"unix:{self.sock}",
            "--state",
            str(self.work / "agent.json"),
            "--ledger",
            str(self.work / "ledger.json"),
            "--enforce",
            "--slurm",
        )
        with open(self.work / "agent.log", "ab") as log:  # the child keeps its own copy
            self.proc = subprocess.Popen(self.cluster.ns_argv(argv), stdout=log, stderr=subprocess.STDOUT)
        _wait(lambda: self.sock.exists() and self.get("/health") is not None, 30, "the agent")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(15)
            self.kill()

    def get(self, path: str) -> Any:
        from commsched.runtime.http.localclient import LocalClient, LocalHTTPError

        try:
            with LocalClient(f"unix:{self.sock}", timeout=5.0) as c:
                r = c.get(path)
        except LocalHTTPError:
            return None
        return r.json() if r.status_code == 200 else None


def _wait(cond: Any, timeout: float, what: str, step: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(step)
    raise AssertionError(f"{what}: not within {timeout} s")


class _Counters:
    """An nftables table of the test's own in the namespace: per job mark, its data bytes out at the
    decided DSCP and at any DSCP; and all data bytes out on loopback (after the agent's marking)."""

    def __init__(self, cluster: SlurmCluster) -> None:
        self.c = cluster
        self.table = f"cs45count{os.getpid() % 100000}"
        self.nft(
            f"add table inet {self.table}\n"
            f"add chain inet {self.table} out {{ type filter hook output priority 100; }}\n"
            f"add counter inet {self.table} lo_data\n"
            f'add rule inet {self.table} out oifname "lo" meta length > 100 counter name "lo_data"\n'
        )

    def nft(self, script: str) -> None:
        done = subprocess.run(
            self.c.ns_argv(["nft", "-f", "-"]), input=script, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"nft: {done.stderr.strip()}\n{script}"

    def watch(self, name: str, mark: int, dscp: int) -> None:
        t = self.table
        self.nft(
            f"add counter inet {t} {name}_at\nadd counter inet {t} {name}_any\n"
            f"add rule inet {t} out ct mark {mark:#x} meta length > 100 ip dscp {dscp} "
            f'counter name "{name}_at"\n'
            f'add rule inet {t} out ct mark {mark:#x} meta length > 100 counter name "{name}_any"\n'
        )

    def read(self) -> dict[str, int]:
        out = subprocess.run(
            self.c.ns_argv(["nft", "-j", "list", "counters", "table", "inet", self.table]),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        got: dict[str, int] = {}
        for item in json.loads(out)["nftables"]:
            if "counter" in item:
                got[item["counter"]["name"]] = int(item["counter"]["bytes"])
        return got

    def close(self) -> None:
        subprocess.run(self.c.ns_argv(["nft", "delete", "table", "inet", self.table]), check=False)


def _ddp(n: int) -> str:
    return JOB.format(py=sys.executable, ex=EXAMPLE, n=n)


def _registered(daemon: _Daemon, job: str) -> dict[str, Any] | None:
    return daemon.jobs().get(job)


def _gone_within(cluster: SlurmCluster, daemon: _Daemon, job: str, timeout: float = 150) -> float:
    """Wait for Slurm to end ``job``; the seconds from then until the daemon no longer has it."""
    cluster.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"), timeout)
    ended = time.monotonic()
    _wait(lambda: job not in daemon.jobs(), 15, f"job {job} dropped", step=0.2)
    return time.monotonic() - ended


@pytest.mark.slow
def test_slurm_jobs_registered_marked_and_dropped(tmp_path: Path) -> None:  # noqa: PLR0915 -- one run, step by step
    why = missing()
    if why is not None:
        pytest.skip(why)
    from commsched.workload.traces.slurm import load_slurm_trace

    work = tmp_path
    (work / "token").write_text(TOKEN + "\n")
    hook_log = work / "hooks.log"
    cluster = SlurmCluster(
        work,
        {
            "COMMSCHED_DAEMON": f"unix:{work}/daemon.sock",
            "COMMSCHED_TOKEN_FILE": str(work / "token"),
            "COMMSCHED_SLURM_HOSTS": f"{os.uname().nodename}=h0",
            "COMMSCHED_SLURM_LOG": str(hook_log),
            "PYTHONPATH": os.pathsep.join(sys.path),
        },
    )
    daemon = _Daemon(work)
    agent = _Agent(work, cluster, daemon)
    counters: _Counters | None = None
    try:
        cluster.start()
        daemon.start()
        agent.start()
        counters = _Counters(cluster)

        # ---- two jobs at once: registered with their hosts and GPUs, marked, dropped
        a = cluster.sbatch(_ddp(40), "--comment", "model=bert", "--job-name", "bert-a")
        b = cluster.sbatch(_ddp(40), "--comment", "model=gpt3", "--job-name", "gpt-b")
        for job in (a, b):
            cluster.wait_state(job, ("RUNNING",), 30)
            got = _wait(lambda j=job: _registered(daemon, j), 10, f"job {job} registered")
            want = [f"h0/gpu{i}" for i in cluster.allocation(job)]
            assert len(want) == 2
            assert got["gpus"] == want, (got, want)
            decision = daemon.get("/v1/decisions/latest?host=h0")
            assert decision["jobs"][job]["hosts"] == ["h0"]
        decision = daemon.get("/v1/decisions/latest?host=h0")
        dscp = {j: int(decision["jobs"][j]["dscp"]) for j in (a, b)}
        for job in (a, b):
            mark = _wait(lambda j=job: (agent.get(f"/v1/jobs/{j}") or {}).get("mark"), 10, f"agent has {job}")
            counters.watch(f"j{job}", int(mark), dscp[job])
        time.sleep(4)  # the DDP iterations run
        before = counters.read()
        for job in (a, b):
            pids = agent.get(f"/v1/jobs/{job}")["pids"]
            assert len(pids) >= 2, f"job {job}: {pids} adopted"  # its two ranks at least
        drops = [_gone_within(cluster, daemon, j) for j in (a, b)]
        after = counters.read()
        for job in (a, b):
            at, any_ = after[f"j{job}_at"], after[f"j{job}_any"]
            assert at > 1_000_000, f"job {job}: {at} data bytes at DSCP {dscp[job]}"
            assert at == any_, f"job {job}: {any_ - at} of {any_} data bytes not at DSCP {dscp[job]}"
        ours = after[f"j{a}_at"] + after[f"j{b}_at"]
        assert ours >= 0.9 * after["lo_data"], (
            ours,
            after["lo_data"],
            before,
        )  # nearly all loopback data is theirs
        assert max(drops) < 10, f"dropped {drops} s after their end"
        for job in (a, b):
            assert cluster.job_state(job) == "COMPLETED"

        # ---- a cancelled job and a failing job
        c = cluster.sbatch("#!/bin/bash\n#SBATCH --gres=gpu:1\nsrun sleep 120\n", "--job-name", "cancel-me")
        d = cluster.sbatch("#!/bin/bash\n#SBATCH --gres=gpu:1\nsleep 2\nexit 3\n", "--job-name", "fail-me")
        _wait(lambda: _registered(daemon, c), 30, f"job {c} registered")
        _wait(lambda: _registered(daemon, d), 30, f"job {d} registered")
        # running: its script started (so its PrologSlurmctld is over) and the agent has its processes
        _wait(lambda: (agent.get(f"/v1/jobs/{c}") or {}).get("pids"), 15, f"job {c} running, adopted")
        cluster.ns_run(["scancel", c], check=True)
        assert _gone_within(cluster, daemon, c) < 10
        assert _gone_within(cluster, daemon, d) < 10
        assert cluster.job_state(c) == "CANCELLED"
        assert cluster.job_state(d) == "FAILED"

        # ---- cancelled the moment it is registered: its PrologSlurmctld may still be running; Slurm then
        # kills it, and an epilog started in the same instant with it (slurmctld.log: "PrologSlurmctld
        # killed by signal 9", "EpilogSlurmctld killed by signal 9"); either its epilog drops it or, no
        # process ever beating for it, the daemon's heartbeat time-out (10 s, checked every second) does
        g = cluster.sbatch(
            "#!/bin/bash\n#SBATCH --gres=gpu:1\nsrun sleep 120\n", "--job-name", "cancel-at-once"
        )
        _wait(lambda: _registered(daemon, g), 30, f"job {g} registered", step=0.01)
        seen = time.monotonic()
        cluster.ns_run(["scancel", g], check=True)
        _wait(lambda: g not in daemon.jobs(), 15, f"job {g} dropped", step=0.2)
        late = time.monotonic() - seen
        assert late < 10 + 1 + 1.5, f"{late:.1f} s: neither its epilog nor its heartbeat time-out dropped it"
        assert cluster.wait_state(g, ("CANCELLED",), 30) == "CANCELLED"

        # ---- the daemon stopped and the agent restarted during a job: it completes, still marked
        e = cluster.sbatch(_ddp(45), "--comment", "model=bert", "--job-name", "bert-e")
        cluster.wait_state(e, ("RUNNING",), 30)
        _wait(lambda: _registered(daemon, e), 10, f"job {e} registered")
        e_dscp = int(daemon.get("/v1/decisions/latest?host=h0")["jobs"][e]["dscp"])
        mark = _wait(
            lambda: (agent.get(f"/v1/jobs/{e}") or {}).get("pids") and agent.get(f"/v1/jobs/{e}")["mark"],
            15,
            "the agent adopted e",
        )
        counters.watch(f"j{e}", int(mark), e_dscp)
        daemon.stop()
        f = cluster.sbatch("#!/bin/bash\nsleep 1\n", "--job-name", "unscheduled")  # prolog: daemon down
        agent.kill()
        agent.start()  # from its state file and ledger, with the daemon away
        restarted = counters.read()[f"j{e}_at"]
        assert cluster.wait_state(f, ("COMPLETED",), 60) == "COMPLETED"
        assert cluster.wait_state(e, ("COMPLETED", "FAILED"), 150) == "COMPLETED"
        end = counters.read()
        assert end[f"j{e}_at"] - restarted > 500_000, (restarted, end)  # marked after the restart too
        assert end[f"j{e}_at"] == end[f"j{e}_any"]
        log = hook_log.read_text()
        assert f"job {f}: daemon unreachable" in log, log
        assert f"job {e}: daemon unreachable" in log, log  # its epilog, with the daemon away
        daemon.start()  # it still has e (the epilog could not tell it): no process beats for it
        assert e in daemon.jobs()
        _wait(lambda: e not in daemon.jobs(), 25, f"job {e} dropped by its heartbeat time-out", step=0.5)

        # ---- the finished jobs as a trace (the fields of sacct --parsable2, from scontrol's record)
        rows = ["JobID|JobName|Submit|Start|End|AllocTRES|NodeList|State|Comment"]
        for job in (a, b, c, d, e, f):
            info = dict(
                w.split("=", 1)
                for w in cluster.ns_run(["scontrol", "-o", "show", "job", job]).stdout.split()
                if "=" in w
            )
            gpus = (
                info.get("TresPerNode", "").rsplit(":", 1)[-1]
                if "gpu" in info.get("TresPerNode", "")
                else "0"
            )
            rows.append(
                "|".join(
                    [
                        job,
                        info["JobName"],
                        info["SubmitTime"],
                        info["StartTime"],
                        info["EndTime"],
                        f"{info['TRES']},gres/gpu={gpus}",
                        info["NodeList"],
                        info["JobState"],
                        info.get("Comment", ""),
                    ]
                )
            )
        (work / "sacct.txt").write_text("\n".join(rows) + "\n")
        trace = load_slurm_trace(work / "sacct.txt")
        by_id = {j.id: j for j in trace.jobs}
        assert set(by_id) == {a, b, c, d, e}  # f held no GPU: skipped
        assert by_id[a].model == "bert" and by_id[b].model == "gpt3" and by_id[c].model == "bert-base"
        assert all(by_id[j].gpus == 2 for j in (a, b, e)) and by_id[c].gpus == by_id[d].gpus == 1
        assert all(j.hosts == (os.uname().nodename,) for j in trace.jobs)
    finally:
        if counters is not None:
            with contextlib.suppress(Exception):
                counters.close()
        cluster.cancel_all()  # first: an agent stopped with no job process left removes all it made
        agent.stop()
        daemon.stop()
        cluster.close()
