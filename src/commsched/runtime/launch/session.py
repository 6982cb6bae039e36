"""One policy on a built testbed: daemon, agents and real job processes; measured iterations and paths.

Flow (:func:`run_policy`): start the scheduling daemon on a Unix socket in the root namespace (every
host namespace reaches it through the file system) with the policy and the scenario's topology; one
host agent per host inside its namespace, holding the probe table (source port per path and
destination port) unless the policy routes by ECMP hash, in which case a connection binds the
model's port and the kernel's hash picks its path, as on an ECMP fabric; one job process per (job,
host) inside the host's namespace. When every job process listens, the jobs are registered with the
daemon (their profiling window starts), the agents get the decision, and the processes start
together. They stop by themselves after the run window; their iteration timestamps and open
connections come back as JSON, and the path each connection really took is read from the routers.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from commsched.errors import TestbedError
from commsched.runtime.http.localclient import LocalClient
from commsched.runtime.jobside.specs import FlatJSON, JobSpecJSON, ProfileSpecJSON
from commsched.runtime.launch import commands as cmd
from commsched.runtime.launch.jobs import CommandJob, JobLayout
from commsched.runtime.launch.procs import Processes, cli_argv
from commsched.runtime.launch.settings import RunSettings
from commsched.runtime.launch.waiting import collect_outputs, wait_run
from commsched.testbed import Testbed
from commsched.testbed.probe import trace_ports
from commsched.topology import NodeId

__all__ = ["PolicyRun", "RunSettings", "run_policy"]


class JobBodyJSON(TypedDict):
    """A job registered with the daemon (``POST /v1/jobs``), on its GPUs as laid out."""

    id: str
    gpu_ids: list[str]
    compute_s: float
    comm_bytes: float
    overlap: float
    collective: str
    priority: NotRequired[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyRun:
    """What one policy's run measured (wall-clock times; ``start`` = when the jobs began)."""

    policy: str
    start: float
    #: job -> one result per host process (:class:`~commsched.runtime.jobside.specs.JobResultJSON`)
    outputs: dict[str, list[dict[str, Any]]]
    decision: dict[str, Any]  # the daemon's last decision (``GET /v1/decisions/latest``, as JSON)
    paths: dict[tuple[str, str, str], tuple[int, ...]]  # (job, src GPU, dst GPU) -> links taken
    #: command jobs: per job, per host, what the agent measured (traffic, connections, report)
    commands: dict[str, dict[str, cmd.CommandHostJSON]] = field(default_factory=dict)
    #: command jobs: when each one's last rank exited by itself (wall clock)
    ended: dict[str, float] = field(default_factory=dict)
    #: the run's working directory (logs, the command jobs' output)
    work: Path = Path()
    #: bytes every emulated link sent in the measuring window (its counters), command-job runs
    link_bytes: dict[int, int] = field(default_factory=dict)


def _http(sock: Path, token: str | None = None) -> LocalClient:
    return LocalClient(f"unix:{sock}", token=token, timeout=30.0)


def _uses_hash(policy: str) -> bool:
    return policy.startswith("ecmp")


def _start_services(
    tb: Testbed,
    procs: Processes,
    work: Path,
    *,
    policy: str,
    st: RunSettings,
    table: Path,
    enforce: bool,
    hosts: list[str],
) -> tuple[Path, str, dict[str, Path]]:
    """The daemon, and an agent on every host of ``hosts`` (the hosts the jobs run on)."""
    token = f"csr-{time.time_ns()}"
    (work / "token").write_text(token)
    dsock = work / "daemon.sock"
    topo = dict(st.topology)
    params = [a for k, v in topo.items() if k != "kind" for a in ("-p", f"{k}={json.dumps(v)}")]
    procs.start(
        "daemon",
        cli_argv(
            "daemon", "--db", str(work / "daemon.db"), "--listen", f"unix:{dsock}",
            "--token-file", str(work / "token"), "--policy", policy, "--topology", str(topo["kind"]),
            *params, "--priority-levels", str(st.priority_levels), "--seed", str(st.seed),
            "--profiling-window", str(st.options.profiling_window_s), "--heartbeat-timeout", "0",
        ),
        capture_stdout=True,
    )  # fmt: skip
    procs.announced("daemon", st.options.start_timeout_s)
    agents: dict[str, Path] = {}
    for name in hosts:
        asock = work / f"agent-{name}.sock"
        nics = [a for nic, ip in tb.host_addresses(name).items() for a in ("--nic", f"{nic}={ip}")]
        ports = [] if _uses_hash(policy) else ["--ports", str(table)]
        # an enforcing agent needs the cgroup hierarchy, which `ip netns exec` hides (nsenter keeps it)
        extra = (
            ["--enforce", "--testbed", tb.name, "--oracle", st.options.oracle] if enforce else []
        )  # profiles: asked for (_wait)
        argv = cli_argv(
            "agent", "--daemon", f"unix:{dsock}", "--host", name, "--listen", f"unix:{asock}",
            "--token-file", str(work / "token"), "--state", str(work / f"agent-{name}.json"),
            "--wait", "5", *ports, *nics, *extra,
        )  # fmt: skip
        wrap = tb.nsenter_argv if enforce else tb.exec_argv
        procs.start(f"agent-{name}", wrap(name, argv), capture_stdout=True)
        agents[name] = asock
    for name in agents:
        procs.announced(f"agent-{name}", st.options.start_timeout_s)
    return dsock, token, agents


def _profile_spec(job: JobLayout, k: int, work: Path, st: RunSettings) -> ProfileSpecJSON | None:
    """What the first host of a job measures and posts (``None``: no profile from this process).

    A host sends ``2 (h - 1) / h`` of every rail's bytes per iteration in a ring all-reduce; the
    factors turn its measurement (testbed bytes and seconds) into the job's declared units.
    """
    h = len(job.hosts)
    window = st.options.profile_share * st.options.profiling_window_s
    if k != 0 or h < 2 or window <= 0:
        return None
    # flat ring: each of the host's g ranks sends 2 (n - 1) / n of the buffer to its successor
    n = len(job.listeners)
    share = 2 * (n - 1) / n * job.rails if job.flat else 2 * (h - 1) / h
    return {
        "window_s": window,
        "daemon": str(work / "daemon.sock"),
        "token_file": str(work / "token"),
        "compute_scale": 1.0 / st.options.time_scale,
        "bytes_scale": 1.0 / share / (st.options.rate_scale * st.options.time_scale),
        "time_scale": 1.0 / st.options.time_scale,
    }


def _spec(tb: Testbed, job: JobLayout, k: int, work: Path, *, agent: Path, st: RunSettings) -> Path:
    # the rail's shard of the scaled buffer, dilated like the compute (a flat ring: all of it per rank)
    rail_bytes = tb.scale_bytes(job.sync_bytes) * st.options.time_scale / (1 if job.flat else job.rails)
    flat: FlatJSON | None = (
        {
            "ranks": len(job.listeners),
            "local": [k * job.rails + i for i in range(job.rails)],
            "peers": [[x.ip, x.port] for x in job.listeners],
        }
        if job.flat
        else None
    )
    spec: JobSpecJSON = {
        "flat": flat,
        "job": job.id,
        "host_index": k,
        "hosts": len(job.hosts),
        "rails": job.rails,
        "compute_s": job.compute_s * st.options.time_scale,
        "overlap": job.overlap,
        "rail_bytes": rail_bytes,
        "listen": [[[job.listener(r, i).ip, job.listener(r, i).port] for i in range(len(job.hosts))]
                   for r in range(job.rails)],
        "agent": str(agent),
        "ready": str(work / f"{job.id}-{k}.ready"),
        "go": str(work / "go"),
        "out": str(work / f"{job.id}-{k}.json"),
        "progress": str(work / f"{job.id}-{k}.progress"),
        "refresh_s": st.options.refresh_s,
        "calibration": st.options.calibration,
        "timeout_s": 60.0,
        "go_timeout_s": st.options.start_timeout_s + 60.0,
        "profile": _profile_spec(job, k, work, st),
    }  # fmt: skip
    path = work / f"{job.id}-{k}.spec.json"
    path.write_text(json.dumps(spec))
    return path


def _wait_files(paths: list[Path], procs: Processes, names: list[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(p.exists() for p in paths):
            return
        dead = [n for n in names if procs.procs[n].poll() is not None]
        if dead:
            raise TestbedError(f"job process {dead[0]} exited early: {procs.tail(dead[0])}")
        time.sleep(0.1)
    missing = [n for n, p in zip(names, paths, strict=True) if not p.exists()]
    raise TestbedError(f"job processes not ready after {timeout_s:.0f} s: {', '.join(missing[:4])}")


def _bodies(jobs: list[JobLayout], commands: list[CommandJob]) -> list[JobBodyJSON]:
    """``POST /v1/jobs`` bodies: library jobs as laid out, command jobs on their ranks' GPUs."""

    def body(job: JobLayout | CommandJob, collective: str) -> JobBodyJSON:
        out: JobBodyJSON = {
            "id": job.id,
            "gpu_ids": [str(g) for g in job.gpus],
            "compute_s": job.compute_s,
            "comm_bytes": job.sync_bytes,
            "overlap": job.overlap,
            "collective": collective,
        }
        if job.priority is not None:
            out["priority"] = job.priority
        return out

    ring = [body(j, "hierarchical_ring" if j.rails > 1 and not j.flat else "ring") for j in jobs]
    return ring + [body(c, c.collective) for c in commands]


def _register(
    dsock: Path, token: str, bodies: list[JobBodyJSON], agents: dict[str, Path], timeout_s: float
) -> int:
    with _http(dsock, token) as client:
        for body in bodies:
            r = client.post("/v1/jobs", json=body)
            if r.status_code >= 300:
                raise TestbedError(f"daemon refused job {body['id']}: {r.status_code} {r.text[:200]}")
        version = int(client.get("/v1/decisions/latest").json()["version"])
    deadline = time.monotonic() + timeout_s
    for name, sock in agents.items():
        with _http(sock) as client:
            while True:
                try:
                    if int(client.get("/v1/decision").json().get("version", 0)) >= version:
                        break
                except Exception:  # the agent is still starting: retried until the deadline
                    pass
                if time.monotonic() > deadline:
                    raise TestbedError(f"agent of {name} did not get decision version {version}")
                time.sleep(0.1)
    return version


def _trace(
    tb: Testbed, jobs: list[JobLayout], outputs: dict[str, list[dict[str, Any]]]
) -> dict[tuple[str, str, str], tuple[int, ...]]:
    """The links every sending connection took, asked from the routers with its real 5-tuple.

    The source NIC is the one whose address the socket is bound to (where its packets leave), so a
    connection that left from another NIC than planned shows up as a path the plan does not have.
    """
    by_dport: dict[int, list[tuple[tuple[str, str, str], NodeId, NodeId, int]]] = defaultdict(list)
    nic_of_ip = {ip: NodeId(nic) for h in tb.topology.hosts for nic, ip in tb.host_addresses(h.id).items()}
    for job in jobs:
        h = len(job.hosts)
        for res in outputs.get(job.id, []):
            k = int(res["host_index"])
            for c in res["connections"]:
                r, peer = int(c["rail"]), int(c["peer"])
                if job.flat:  # ranks of one ring over every GPU
                    src, dst = job.listeners[int(c["rank"])], job.listeners[peer]
                else:
                    src, dst = job.listener(r, k), job.listener(r, peer)
                if src.nic == dst.nic or src.host_index == dst.host_index or h < 2:
                    continue
                key = (job.id, str(src.gpu), str(dst.gpu))
                # the NIC the connection really left from (its local address), not the planned one
                out_nic = nic_of_ip.get(str(c["local"][0]), src.nic)
                by_dport[int(c["remote"][1])].append((key, out_nic, dst.nic, int(c["local"][1])))
    out: dict[tuple[str, str, str], tuple[int, ...]] = {}
    for dport, flows in by_dport.items():
        links = trace_ports(tb.layout, [(s, d, p) for _, s, d, p in flows], dport=dport)
        for (key, *_), lk in zip(flows, links, strict=True):
            out[key] = tuple(int(x) for x in lk)
    return out


def _start_jobs(
    tb: Testbed, procs: Processes, specs: list[tuple[JobLayout, int, str]], *, agents: dict[str, Path],
    st: RunSettings,
) -> list[str]:  # fmt: skip
    """One job process per (job, host index, host); returns their names once every one listens."""
    work = procs.directory()
    names, ready = [], []
    for job, k, host in specs:
        path = _spec(tb, job, k, work, agent=agents[host], st=st)
        name = f"job-{job.id}-{k}"
        procs.start(
            name, tb.exec_argv(host, [*cli_argv()[:1], "-m", "commsched.runtime.jobside.jobproc", str(path)])
        )
        names.append(name)
        ready.append(work / f"{job.id}-{k}.ready")
    _wait_files(ready, procs, names, st.options.start_timeout_s)
    return names


def _go(work: Path, st: RunSettings) -> tuple[float, float]:
    """Tell every job process when to start and end (the ``go`` file, written atomically)."""
    start = time.time() + 0.5
    end_at = start + st.options.profiling_window_s + st.options.window_s
    tmp = work / "go.tmp"
    tmp.write_text(json.dumps({"start": start, "end_at": end_at}))
    tmp.replace(work / "go")
    return start, end_at


def run_policy(
    tb: Testbed,
    jobs: list[JobLayout],
    policy: str,
    st: RunSettings,
    *,
    work: Path,
    table: Path,
    commands: list[CommandJob] | None = None,
) -> PolicyRun:
    """Run every job under ``policy`` for the profiling window plus ``window_s``; stop everything.

    Command jobs start first (through their hosts' agents) and the clock starts once every one of
    them sends data (their start-up, Python and library imports, is not measured); the library jobs
    start at that moment.
    """
    commands = commands or []
    work.mkdir(parents=True, exist_ok=True)
    procs = Processes(work)
    agents: dict[str, Path] = {}
    token = ""
    try:
        used = sorted({h for j in jobs for h in j.hosts} | {h for c in commands for h in c.hosts})
        st.options.say(f"{policy}: starting the daemon and {len(used)} host agents")
        dsock, token, agents = _start_services(
            tb, procs, work, policy=policy, st=st, table=table, enforce=bool(commands), hosts=used
        )
        specs = [(job, k, host) for job in jobs for k, host in enumerate(job.hosts)]
        names = _start_jobs(tb, procs, specs, agents=agents, st=st)
        _register(dsock, token, _bodies(jobs, commands), agents, 60.0)
        if commands:
            st.options.say(
                f"{policy}: starting {len(commands)} command jobs: {', '.join(c.id for c in commands)}"
            )
            cmd.start_commands(commands, agents, token, work)
            cmd.wait_iterating(commands, agents, token, work, st.options.start_timeout_s)
        start, end_at = _go(work, st)
        o = st.options
        o.say(
            f"{policy}: {len(jobs) + len(commands)} jobs running: {o.profiling_window_s:g} s profiling "
            f"window, then {o.window_s:g} s measured"
        )
        ended, link_bytes = wait_run(
            procs, names, commands, agents=agents, token=token, st=st, end_at=end_at, tb=tb
        )
        codes = procs.wait_all(names, max(0.0, end_at - time.time()) + 90.0)
        measured = {c.id: cmd.collect(c, agents, token) for c in commands}
        for job_id, data in measured.items():  # kept with the run's files (--keep)
            (work / f"{job_id}.measured.json").write_text(json.dumps(data))
        outputs = collect_outputs(specs, work, codes, procs)
        with _http(dsock) as client:
            decision = client.get("/v1/decisions/latest").json()
        paths = _trace(tb, jobs, outputs)
    finally:
        if commands and agents:
            cmd.stop_commands(commands, agents, token)
        procs.close()
    return PolicyRun(
        policy=policy,
        start=start,
        outputs=dict(outputs),
        decision=decision,
        paths=paths,
        commands=measured,
        ended=ended,
        work=work,
        link_bytes=link_bytes,
    )
