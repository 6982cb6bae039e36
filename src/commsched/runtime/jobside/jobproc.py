"""One job process on a host: compute as a sleep, then real all-reduces of the job's bytes, timed.

``python -m commsched.runtime.jobside.jobproc SPEC.json`` runs the part of a data-parallel job that lives on
one host (a testbed host namespace): per iteration it sleeps the compute time, releasing the
communication after the fraction ``overlap`` of it (Crux's model: the next iteration starts when both
are done), and runs the inter-host phase of the hierarchical ring all-reduce for real: one ring
all-reduce per rail (the GPUs with the same local index on every host of the job, each on its NIC),
of the rail's share of the job's (scaled) bytes, through :mod:`commsched.runtime`. The rails run in
threads and are joined, so a host waits for its slowest rail as the job's collective does. The
intra-host phases cross NVLink / PCIe, which the testbed does not emulate; they are not run. With
``flat`` in the spec (a flat ring over several GPUs per host) the host's threads are instead its
ranks of one ring over every GPU of the job (``flat.local``: their ranks, ``flat.peers``: every
rank's address), each all-reducing the whole buffer; the hops between two ranks of this host cross
its loopback.

Every connection binds the source port and sets the DSCP that the host agent answers
(``GET /v1/port`` over its Unix socket) for the job's ranks; ``policy_refresh_s`` re-asks it, so a
class change (the end of the profiling window) re-marks open connections.

The spec (JSON, written by the launcher): ``job``, ``host_index``, ``hosts``, ``rails``, ``compute_s``,
``overlap``, ``rail_bytes`` (bytes all-reduced per rail and iteration, already scaled), ``flat``
(``null``, or ``{"ranks", "local", "peers"}`` for a flat ring), ``progress`` (a file the process
rewrites with the number of iterations done),
``listen`` (per rail: ``[ip, port]`` of every host of the job, in host order), ``agent`` (Unix socket
path or ``null``), ``ready`` (file to create once listening), ``go`` (file the launcher writes when
all processes are ready: ``{"start": T0, "end_at": T1}``, wall-clock seconds: start at ``T0``, stop
after ``T1``), ``out`` (result JSON), ``refresh_s``, ``timeout_s``, and optionally ``profile``: the
job's profiler (:mod:`commsched.runtime.profiling.profiler`) records every chunk this process sends and the
compute of every iteration; after ``profile.window_s`` it recovers the iteration period from the
traffic series by FFT and, when ``profile.daemon`` (Unix socket) and ``profile.token_file`` are
given, posts ``W_j``, ``t_j`` and the period to the daemon (``PUT /v1/jobs/{job}/profile``, Crux's
end of the profiling window), converted to the job's own units by ``profile.compute_scale``,
``profile.bytes_scale`` and ``profile.time_scale`` (measured x scale). Stopping is agreed through the
all-reduce itself: a host past ``end_at`` adds 1 to the first element of rail 0's buffer, and every
host stops after the iteration whose sum is positive, so all hosts of a job run the same number of
iterations.
"""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from commsched.runtime.jobside.agentpolicy import AgentPolicy
from commsched.runtime.jobside.profilepost import ProfilePoster
from commsched.runtime.jobside.specs import AnswerRowJSON, JobConnectionJSON, JobResultJSON, JobSpecJSON
from commsched.runtime.transport import Options, init

__all__ = ["main", "run"]


def _wait_go(path: Path, deadline: float) -> tuple[float, float]:
    while time.time() < deadline:
        try:
            go = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            go = None
        if isinstance(go, dict):
            return float(go["start"]), float(go["end_at"])
        time.sleep(0.05)
    raise TimeoutError(f"no start signal in {path}")


def tcp_counters() -> dict[str, int]:
    """TCP counters of this network namespace (``/proc/net/snmp``): segments out, retransmitted."""
    try:
        rows = [ln.split() for ln in Path("/proc/net/snmp").read_text().splitlines() if ln.startswith("Tcp:")]
    except OSError:
        return {}
    if len(rows) < 2:
        return {}
    values = dict(zip(rows[0][1:], rows[1][1:], strict=False))
    return {k: int(values[k]) for k in ("OutSegs", "RetransSegs") if k in values}


def _progress(path: str | None, done: int) -> None:
    """Write the number of iterations done to ``path`` (the launcher's progress lines)."""
    if path:
        tmp = Path(path + ".tmp")
        tmp.write_text(str(done))
        tmp.replace(path)


def _communicators(spec: JobSpecJSON, poster: ProfilePoster | None) -> tuple[list[Any], list[AgentPolicy]]:
    """One communicator per rail (or per local rank of a flat ring), each with its agent policy."""
    job, k, hosts, rails = spec["job"], int(spec["host_index"]), int(spec["hosts"]), int(spec["rails"])
    comms: list[Any] = []
    policies: list[AgentPolicy] = []
    flat = spec.get("flat")
    for r in range(rails):
        if flat:  # one ring over every GPU: this host's r-th rank, the job's rank flat["local"][r]
            peers = [(str(ip), int(port)) for ip, port in flat["peers"]]
            rank, world, name, pol_rail, pol_rails = int(flat["local"][r]), len(peers), f"{job}.flat", 0, 1
        else:  # the ring of rail r over the hosts
            peers = [(str(ip), int(port)) for ip, port in spec["listen"][r]]
            rank, world, name, pol_rail, pol_rails = k, hosts, f"{job}.rail{r}", r, rails
        pol = AgentPolicy(
            socket_path=spec.get("agent"),
            job=job,
            rail=pol_rail,
            rails=pol_rails,
            dports=[p for _, p in peers],
            refresh_s=spec.get("refresh_s"),
        )
        policies.append(pol)
        opts = Options(
            policy=pol,
            timeout_s=float(spec.get("timeout_s", 60.0)),
            policy_refresh_s=spec.get("refresh_s"),
            observer=None if poster is None else poster.record_transfer,
        )
        comms.append(init(job=name, rank=rank, world_size=world, peers=peers, options=opts))
    return comms, policies


class _HostPart:
    """The job's part on this host: its communicators, buffers and what it measured (one owner)."""

    def __init__(self, spec: JobSpecJSON) -> None:
        self.spec = spec
        self.rails = int(spec["rails"])
        n_elems = max(1, math.ceil(float(spec["rail_bytes"]) / 4))  # float32: 4 bytes per element
        profile = spec.get("profile")
        self.poster = ProfilePoster(spec["job"], profile) if profile else None
        self.comms, self.policies = _communicators(spec, self.poster)
        self.bufs = [np.zeros(n_elems, dtype=np.float32) for _ in range(self.rails)]
        self.small = [np.zeros(comm.world_size, dtype=np.float32) for comm in self.comms]  # one per rank
        self.iters: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self.calib: list[float] = []

    def reduce(self, r: int, tiny: bool = False) -> None:
        try:
            self.comms[r].all_reduce(self.small[r] if tiny else self.bufs[r])
        except Exception as exc:  # reported in the result; the job stops
            self.errors.append(f"rail {r}: {type(exc).__name__}: {exc}")

    def all_rails(self, tiny: bool) -> None:
        threads = [threading.Thread(target=self.reduce, args=(r, tiny)) for r in range(1, self.rails)]
        for t in threads:
            t.start()
        self.reduce(0, tiny)
        for t in threads:
            t.join()

    def calibrate(self) -> None:
        """Per-step latency of the real path (software, kernel, fabric): tiny all-reduces on every rail
        at once, timed; the first opens the connections and is not counted."""
        for _ in range(int(self.spec.get("calibration", 0)) + 1):
            c0 = time.perf_counter()
            self.all_rails(True)
            self.calib.append(time.perf_counter() - c0)

    def iterate(self, end_at: float) -> bool:
        """One iteration: compute (a sleep) with the rails' all-reduces released after ``overlap`` of it.

        Returns whether the job stops (some host was past ``end_at``: the sum of the flag is positive).
        """
        compute_s, overlap = float(self.spec["compute_s"]), float(self.spec["overlap"])
        t0 = time.time()
        for b in self.bufs:
            b.fill(0.0)
        self.bufs[0][0] = 1.0 if t0 >= end_at else 0.0
        time.sleep(overlap * compute_s)  # the compute before the communication is released
        threads = [threading.Thread(target=self.reduce, args=(r,)) for r in range(self.rails)]
        for t in threads:
            t.start()
        time.sleep((1.0 - overlap) * compute_s)  # the rest of the compute, beside it
        for t in threads:
            t.join()
        self.iters.append((t0, time.time()))
        _progress(self.spec.get("progress"), len(self.iters))
        if self.poster is not None:
            self.poster.after_iteration(compute_s)
        return bool(self.bufs[0][0] > 0.5)

    def connections(self) -> list[JobConnectionJSON]:
        """Every outgoing connection with its addresses and the DSCP read back from its socket."""
        return [
            {"rail": r, "rank": comm.rank, "peer": c.peer, "local": list(c.local), "remote": list(c.remote),
             "dscp": c.dscp}
            for r, comm in enumerate(self.comms)
            for c in comm.connections()
            if c.direction == "out"
        ]  # fmt: skip

    def close(self) -> None:
        for comm in self.comms:
            comm.close()
        for pol in self.policies:
            pol.close()
        if self.poster is not None:
            self.poster.close()

    def step_latency_s(self) -> float | None:
        """Seconds per ring step of a tiny all-reduce (median; 2(h-1) steps per all-reduce)."""
        world = self.comms[0].world_size
        if len(self.calib) < 2 or world < 2:
            return None
        return float(statistics.median(self.calib[1:]) / (2 * (world - 1)))


def run(spec: JobSpecJSON) -> JobResultJSON:
    """Run the job's part on this host as ``spec`` says; returns the result record."""
    part = _HostPart(spec)
    Path(spec["ready"]).write_text(str(os.getpid()))
    start, end_at = _wait_go(Path(spec["go"]), time.time() + float(spec.get("go_timeout_s", 300.0)))
    time.sleep(max(0.0, start - time.time()))
    tcp0 = tcp_counters()
    conns: list[JobConnectionJSON] = []
    try:
        part.calibrate()
        while not part.errors and not part.iterate(end_at):
            pass
        conns = part.connections()
    finally:
        part.close()
    answers: list[AnswerRowJSON] = [
        {"rail": p.rail, "src": s, "dst": d, **a}
        for p in part.policies
        for (s, d), a in sorted(p.answers.items())
    ]
    return {
        "job": spec["job"],
        "host_index": int(spec["host_index"]),
        "iterations": part.iters,
        "connections": conns,
        "answers": answers,
        "errors": part.errors,
        "tcp": {k: v - tcp0.get(k, 0) for k, v in tcp_counters().items()},  # whole host namespace
        "cpu_s": time.process_time(),  # CPU this process used (all threads), for the load report
        "profile": None if part.poster is None else part.poster.report,
        "step_latency_s": part.step_latency_s(),
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m commsched.runtime.jobside.jobproc SPEC.json``; writes ``spec['out']``."""
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(Path(args[0]).read_text())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    result = run(spec)
    tmp = Path(spec["out"] + ".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(spec["out"])
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
