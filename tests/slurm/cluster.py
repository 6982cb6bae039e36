"""A real Slurm for the tests: munge, slurmctld and slurmd from Debian's packages, configured in a folder.

Everything Slurm runs (the controller, the node's daemon, the jobs) lives in a network namespace of
the test's own (``cs45s<pid>``, loopback only), so its ports (18450, 18451) and traffic stay there;
munge serves on a socket in the folder. The node is this machine under its own host name (slurmd
takes its node name from the host name: one slurmd per host, so one node; a second slurmd would need
Slurm built with ``--enable-multiple-slurmd``, which Debian's is not). It offers 8 CPUs and 8 GPUs
(character devices made in the folder: Slurm hands out their indices, which is all the integration
reads). The hooks of ``slurm.conf`` are the scripts docs/slurm.md gives, calling ``commsched slurm
prolog|epilog`` of this checkout.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

SLURMCTLD_PORT = 18450
SLURMD_PORT = 18451
TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "srun", "nft", "nsenter", "ip")


def missing() -> str | None:
    """Why this machine cannot run the fixture (``None``: it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespace, Slurm's daemons, nftables, cgroups)"
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"needs {tool!r} (Debian packages slurm-wlm, munge, nftables, iproute2: make sysdeps)"
    from commsched.runtime.enforce.processes.cgroups import cgroup2_root
    from commsched.testbed import netns

    why = netns.missing_capability()
    if why is not None:
        return why
    try:
        cgroup2_root()
    except Exception as exc:
        return str(exc)
    return None


def _conf(work: Path, node: str, hook: Path) -> str:
    return f"""ClusterName=cs45
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={SLURMCTLD_PORT}
SlurmdPort={SLURMD_PORT}
AuthType=auth/munge
AuthInfo=socket={work}/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={work}/ctld
SlurmdSpoolDir={work}/spool
SlurmctldPidFile={work}/slurmctld.pid
SlurmdPidFile={work}/slurmd.pid
SlurmctldLogFile={work}/slurmctld.log
SlurmdLogFile={work}/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
MinJobAge=600
JobCompType=jobcomp/filetxt
JobCompLoc={work}/jobcomp.txt
AccountingStorageType=accounting_storage/none
PrologSlurmctld={hook}-prolog
EpilogSlurmctld={hook}-epilog
NodeName={node} NodeAddr=127.0.0.1 CPUs=8 Gres=gpu:8 State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _hook(path: Path, verb: str, env: dict[str, str]) -> None:
    """The two-line hook of docs/slurm.md, with this checkout's interpreter and sources."""
    exports = " ".join(f"{k}={v}" for k, v in env.items())
    argv = f"{sys.executable} -c 'from commsched.cli.app import main; main()' slurm {verb}"
    path.write_text(f"#!/bin/sh\nexport {exports}\nexec {argv}\n")
    path.chmod(0o755)


class SlurmCluster:
    """The cluster of one test (see the module docstring); :meth:`close` removes all of it."""

    def __init__(self, work: Path, hook_env: dict[str, str]) -> None:
        self.work = work
        self.ns = f"cs45s{os.getpid() % 100000}"
        self.node = socket.gethostname()
        self.conf = work / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.hook_env = {"SLURM_CONF": str(self.conf), **hook_env}
        self._made_ns = False

    # ------------------------------------------------------------------ start and stop

    def start(self) -> None:
        w = self.work
        for d in ("ctld", "spool", "dev"):
            (w / d).mkdir(parents=True, exist_ok=True)
        for i in range(8):  # /dev/null's numbers: Slurm wants devices, hands out their indices
            dev = w / "dev" / f"gpu{i}"
            if not dev.exists():
                os.mknod(dev, 0o600 | 0o020000, os.makedev(1, 3))
        (w / "gres.conf").write_text(f"NodeName={self.node} Name=gpu File={w}/dev/gpu[0-7]\n")
        _hook(w / "hook-prolog", "prolog", self.hook_env)
        _hook(w / "hook-epilog", "epilog", self.hook_env)
        self.conf.write_text(_conf(w, self.node, w / "hook"))
        key = w / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        subprocess.run(["ip", "netns", "add", self.ns], check=True)
        self._made_ns = True
        subprocess.run(["ip", "-n", self.ns, "link", "set", "lo", "up"], check=True)
        # an address beside loopback: Slurm binds its ports with AI_ADDRCONFIG, which ignores loopback
        subprocess.run(
            ["ip", "-n", self.ns, "link", "add", "cs45d0", "type", "veth", "peer", "name", "cs45d1"],
            check=True,
        )
        subprocess.run(["ip", "-n", self.ns, "addr", "add", "10.245.0.1/24", "dev", "cs45d0"], check=True)
        subprocess.run(["ip", "-n", self.ns, "link", "set", "cs45d0", "up"], check=True)
        subprocess.run(
            [
                "munged",
                "-f",
                f"--socket={w}/munge.sock",
                f"--key-file={key}",
                f"--log-file={w}/munged.log",
                f"--pid-file={w}/munged.pid",
                f"--seed-file={w}/munged.seed",
            ],
            check=True,
        )
        self.ns_run(["slurmctld", "-f", str(self.conf), "-i"], check=True)
        self.ns_run(["slurmd", "-f", str(self.conf)], check=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            out = self.ns_run(["sinfo", "-h", "-o", "%T"]).stdout.strip()
            if out == "idle":
                return
            time.sleep(0.3)
        raise RuntimeError(f"slurmd did not come up: sinfo says {out!r}; see {w}/slurmd.log")

    def cancel_all(self, wait_s: float = 10.0) -> None:
        """Cancel every job and wait (up to ``wait_s``) until none is left running or ending."""
        with contextlib.suppress(Exception):
            self.ns_run(["scancel", "--full", "--user=root"], timeout=10)
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and self.ns_run(["squeue", "-h"], timeout=10).stdout.strip():
                time.sleep(0.2)

    def close(self) -> None:
        self.cancel_all(wait_s=0)
        for name in ("slurmd", "slurmctld", "munged"):
            self._stop_pidfile(self.work / f"{name}.pid")
        if self._made_ns:
            self._kill_namespace()
            subprocess.run(["ip", "netns", "del", self.ns], check=False)

    def _stop_pidfile(self, path: Path) -> None:
        try:
            pid = int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def _kill_namespace(self) -> None:
        """SIGKILL what is left in the test's own namespace (its jobs, slurmstepd)."""
        out = subprocess.run(["ip", "netns", "pids", self.ns], capture_output=True, text=True, check=False)
        for pid in out.stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)

    # ------------------------------------------------------------------ commands

    def ns_argv(self, argv: list[str]) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{self.ns}", *argv]

    def ns_run(
        self, argv: list[str], *, check: bool = False, timeout: float = 30
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.ns_argv(argv), env=self.env, capture_output=True, text=True, check=check, timeout=timeout
        )

    def sbatch(self, script: str, *options: str) -> str:
        """Submit ``script`` (a batch script's text); the job id."""
        path = self.work / f"job{time.monotonic_ns()}.sh"
        path.write_text(script)
        out = self.ns_run(
            ["sbatch", "--parsable", f"--output={self.work}/slurm-%j.out", *options, str(path)], check=True
        )
        return out.stdout.strip().split(";")[0]

    def job_state(self, job: str) -> str:
        """``JOBSTATE`` as ``scontrol show job`` says (``""``: not known)."""
        out = self.ns_run(["scontrol", "show", "job", job]).stdout
        for word in out.split():
            if word.startswith("JobState="):
                return word.split("=", 1)[1]
        return ""

    def wait_state(self, job: str, states: tuple[str, ...], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = self.job_state(job)
            if state in states:
                return state
            time.sleep(0.1)
        raise AssertionError(f"job {job} is {state!r} after {timeout} s (wanted {states})")

    def allocation(self, job: str) -> list[int]:
        """The GPU indices Slurm gave ``job`` on the node, as ``scontrol show job -d`` says."""
        out = self.ns_run(["scontrol", "show", "job", "-d", job]).stdout
        for word in out.split():
            if word.startswith("GRES=gpu:") and "(IDX:" in word:
                idx = word.split("(IDX:")[1].rstrip(")")
                got: list[int] = []
                for part in idx.split(","):
                    lo, _, hi = part.partition("-")
                    got += range(int(lo), int(hi or lo) + 1)
                return got
        return []
