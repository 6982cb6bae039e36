"""Slurm's prolog and epilog: each Slurm job registered with the daemon when it starts, dropped at its end.

``commsched slurm prolog`` and ``commsched slurm epilog`` run as Slurm's ``PrologSlurmctld`` and
``EpilogSlurmctld`` (once per job, on the controller; or as the nodes' ``Prolog``/``Epilog``, where
the first node of the job does it), from Slurm's environment alone (docs/slurm.md):

* the job's **name** at the daemon is ``SLURM_JOB_ID``;
* its **hosts** are ``SLURM_JOB_NODELIST`` expanded, each node through the host map (``NODE=HOST``;
  a node not in the map keeps its name);
* its **GPUs** are the allocation's: the ``GRES=gpu:N(IDX:...)`` of each node in ``scontrol show job
  -d ID`` become ``HOST/gpuI``; without them (no ``scontrol``, no GPU GRES) every GPU of its hosts;
* its **model or profile** is in its comment (``sbatch --comment "model=bert"``, also
  ``compute_s=``, ``comm_bytes=``, ``overlap=``, ``priority=``; :func:`comment_fields`), else the
  default model of the settings, else the nominal profile every undeclared job gets (1 s, 1 MB: the
  agents' traffic profile replaces it).

Nothing here fails or delays a job: every request has a short time-out (2 s), any failure (the daemon
down, a refusal, a Slurm command missing) is one line in the log and the hook exits 0 (Slurm would
requeue a job whose prolog fails, and drain its node). The job then runs unscheduled.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from commsched.runtime.http.localclient import LocalClient, LocalHTTPError
from commsched.workload.traces.slurm import comment_fields, expand_hostlist

__all__ = [
    "NOMINAL",
    "SlurmJob",
    "SlurmSettings",
    "allocated_gpus",
    "epilog",
    "job_from_env",
    "prolog",
    "registration",
]

#: the profile of a job that declares none (as ``testbed run`` registers command jobs)
NOMINAL = {"compute_s": 1.0, "comm_bytes": 1e6}
_NUMBERS = ("compute_s", "comm_bytes", "overlap")
_GRES = re.compile(r"gpu(?::[^:(,\s]+)?:(\d+)\(IDX:([^)]*)\)")


@dataclass(frozen=True, slots=True, kw_only=True)
class SlurmSettings:
    """Where the daemon is and how Slurm's names become the daemon's."""

    daemon: str
    token: str | None = None
    hosts: Mapping[str, str] = field(default_factory=dict)
    model: str | None = None
    timeout_s: float = 2.0
    scontrol: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SlurmJob:
    """One Slurm job as its prolog sees it."""

    id: str
    nodes: tuple[str, ...]
    comment: str = ""
    #: node -> GPU indices the allocation gives it (empty: not known)
    gpus: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: where the hook runs: ``prolog_slurmctld``/``epilog_slurmctld`` (the controller) or a node's name
    context: str = ""
    node: str = ""


def _indices(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return tuple(out)


def allocated_gpus(scontrol_text: str) -> dict[str, tuple[int, ...]]:
    """Node -> GPU indices from ``scontrol show job -d ID``'s per-node lines.

    >>> allocated_gpus("   Nodes=gpu[01-02] CPU_IDs=0-7 Mem=0 GRES=gpu:h200:2(IDX:2-3)\\n"
    ...                "   Nodes=gpu05 CPU_IDs=0 Mem=0 GRES=gpu:1(IDX:6)\\n")
    {'gpu01': (2, 3), 'gpu02': (2, 3), 'gpu05': (6,)}
    """
    out: dict[str, tuple[int, ...]] = {}
    for line in scontrol_text.splitlines():
        words = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if "Nodes" not in words or "GRES" not in line:
            continue
        idx = tuple(i for m in _GRES.finditer(line) for i in _indices(m.group(2)))
        if idx:
            for node in expand_hostlist(words["Nodes"]):
                out[node] = idx
    return out


def _scontrol(job: str, path: str | None, timeout_s: float) -> str:
    exe = path or shutil.which("scontrol") or "/usr/bin/scontrol"
    done = subprocess.run(
        [exe, "show", "job", "-d", job], capture_output=True, text=True, timeout=timeout_s, check=False
    )
    return done.stdout if done.returncode == 0 else ""


def job_from_env(
    env: Mapping[str, str], settings: SlurmSettings, *, show: Callable[[str], str] | None = None
) -> SlurmJob:
    """The job of Slurm's hook environment (``SLURM_JOB_ID``, ``SLURM_JOB_NODELIST``, ...).

    ``show``: ``scontrol show job -d ID``'s text (default: run it). Raises :class:`ValueError` when
    Slurm's variables are missing or malformed.
    """
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or ""
    if not re.fullmatch(r"\d+", job):
        raise ValueError(f"SLURM_JOB_ID = {job!r} (not run by Slurm?)")
    nodes = expand_hostlist(env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or "")
    try:
        text = (show or (lambda j: _scontrol(j, settings.scontrol, settings.timeout_s)))(job)
        gpus = allocated_gpus(text)
    except (OSError, subprocess.SubprocessError, ValueError):
        gpus = {}
    if not gpus and env.get("SLURM_JOB_GPUS") and len(nodes) == 1:  # a node's own prolog
        gpus = {nodes[0]: _indices(env["SLURM_JOB_GPUS"])}
    return SlurmJob(
        id=job,
        nodes=nodes,
        comment=env.get("SLURM_JOB_COMMENT", ""),
        gpus=gpus,
        context=env.get("SLURM_SCRIPT_CONTEXT", ""),
        node=env.get("SLURMD_NODENAME", ""),
    )


def registration(job: SlurmJob, settings: SlurmSettings) -> dict[str, object]:
    """The body of ``POST /v1/jobs`` for ``job`` (see the module docstring for the rules).

    >>> s = SlurmSettings(daemon="unix:/x", hosts={"vm": "h0"})
    >>> registration(SlurmJob(id="7", nodes=("vm",), gpus={"vm": (2, 3)}, comment="model=bert"), s)
    {'id': '7', 'gpu_ids': ['h0/gpu2', 'h0/gpu3'], 'model': 'bert'}
    >>> registration(SlurmJob(id="8", nodes=("vm", "n2")), s)
    {'id': '8', 'hosts': ['h0', 'n2'], 'compute_s': 1.0, 'comm_bytes': 1000000.0}
    """
    hosts = [settings.hosts.get(n, n) for n in job.nodes]
    body: dict[str, object] = {"id": job.id}
    if job.gpus and all(job.gpus.get(n) for n in job.nodes):
        body["gpu_ids"] = [f"{h}/gpu{i}" for n, h in zip(job.nodes, hosts, strict=True) for i in job.gpus[n]]
    else:
        body["hosts"] = hosts
    said = comment_fields(job.comment)
    for key in _NUMBERS:
        if key in said:
            body[key] = float(said[key])
    if "priority" in said:
        body["priority"] = int(said["priority"])
    model = said.get("model") or settings.model
    if model:
        body["model"] = model
    elif not {"compute_s", "comm_bytes"} <= body.keys():
        body.update({k: v for k, v in NOMINAL.items() if k not in body})
    return body


def _mine(job: SlurmJob) -> bool:
    """Whether this run of the hook speaks for the job: the controller's, or the first node's."""
    return job.context.endswith("slurmctld") or not job.node or job.node == job.nodes[0]


def _answer(r: Any) -> str:
    try:
        return str(r.json().get("error", r.text))[:200]
    except ValueError:
        return str(r.text)[:200]


def prolog(env: Mapping[str, str], settings: SlurmSettings, **kw: Any) -> str:
    """Register the job of ``env`` with the daemon; one line saying what happened (never raises)."""
    t0 = time.monotonic()
    try:
        job = job_from_env(env, settings, **kw)
        if not _mine(job):
            return f"job {job.id}: registered by its first node ({job.nodes[0]})"
        body = registration(job, settings)
        with LocalClient(settings.daemon, token=settings.token, timeout=settings.timeout_s) as c:
            r = c.post("/v1/jobs", json=body)
        took = time.monotonic() - t0
        if r.status_code == 201:
            where = body.get("gpu_ids") or body.get("hosts")
            return f"job {job.id}: registered (version {r.json().get('version')}, {where}, {took:.2f} s)"
        if r.status_code == 409 and ("taken" in _answer(r) or "already running" in _answer(r)):
            return f"job {job.id}: already registered"
        return f"job {job.id}: refused ({r.status_code}: {_answer(r)}): it runs unscheduled"
    except LocalHTTPError as exc:
        return f"job {env.get('SLURM_JOB_ID', '?')}: daemon unreachable ({exc}): it runs unscheduled"
    except Exception as exc:  # nothing may fail a job: every failure is a line of the log
        return f"job {env.get('SLURM_JOB_ID', '?')}: not registered ({type(exc).__name__}: {exc})"


def epilog(env: Mapping[str, str], settings: SlurmSettings) -> str:
    """Drop the job of ``env`` from the daemon (any end: completed, cancelled, failed, timed out)."""
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or "?"
    try:
        nodes = expand_hostlist(env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or "")
        ctx, node = env.get("SLURM_SCRIPT_CONTEXT", ""), env.get("SLURMD_NODENAME", "")
        if not _mine(SlurmJob(id=job, nodes=nodes, context=ctx, node=node)):
            return f"job {job}: dropped by its first node ({nodes[0]})"
        with LocalClient(settings.daemon, token=settings.token, timeout=settings.timeout_s) as c:
            r = c.delete(f"/v1/jobs/{urllib.parse.quote(job, safe='')}")
        if r.status_code == 200:
            return f"job {job}: deregistered (version {r.json().get('version')})"
        if r.status_code == 404:
            return f"job {job}: not registered (nothing to drop)"
        return f"job {job}: not dropped ({r.status_code}: {_answer(r)})"
    except LocalHTTPError as exc:
        return f"job {job}: daemon unreachable ({exc}): not dropped (its heartbeat time-out drops it)"
    except Exception as exc:  # nothing may fail a job
        return f"job {job}: not dropped ({type(exc).__name__}: {exc})"
