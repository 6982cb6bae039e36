"""Benchmark: the scheduling daemon's decision latency and read throughput, end to end over HTTP.

Cluster: 300 jobs on a 2,048-GPU two-layer Clos (16 ToRs x 16 hosts x 8 GPUs, 8 Aggs, 16 uplinks per
ToR), jobs of 1-64 GPUs placed by ``pack`` (the same cluster as ``bench_crux_recompute.py``), policy
``crux-full``. The jobs are written to a fresh SQLite file and ``commsched daemon`` is started on it
as a separate process (a restart with 300 jobs).

1. Decision latency: a client long-polls ``/v1/decisions/latest?after=V`` (as an agent does) while
   another posts a job event (a job start, then its end, alternately); the latency is from sending
   the event to the long-poll's answer carrying version ``V + 1``. Target < 1 s.
2. Read throughput: client processes (2 x 4 threads, keep-alive) fetch the agents' read,
   ``/v1/decisions/latest?host=H`` over many hosts, for 3 s. Target >= 1,000 requests/s.

Both are repeated; medians are printed with the ratio to the target. The CPU is shared with the
client processes (and, on a busy machine, with others): figures are noisy, the medians less so.

Run: ``.venv/bin/python benchmarks/bench_daemon.py``
"""

from __future__ import annotations

import multiprocessing as mp
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from commsched.runtime.daemon import ClusterConfig, JobRecord, Store
from commsched.scheduling.interfaces import PlacementRequest
from commsched.scheduling.placement import pack
from commsched.scheduling.state import PlacedJob
from commsched.topology.builders import two_layer_clos
from commsched.workload import JobId, JobSpec
from commsched.workload.zoo import get_model

LATENCY_TARGET_S = 1.0
READ_TARGET_RPS = 1000.0
JOBS = 300
MODELS = ("bert", "gpt", "resnet50")
SIZES = (1, 2, 4, 4, 8, 8, 8, 16, 16, 32, 64)
TOPOLOGY = {"kind": "two_layer_clos", "tors": 16, "aggs": 8, "hosts_per_tor": 16, "uplinks_per_tor": 16}
TOKEN = "bench-daemon-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def seed_jobs(seed: int = 0) -> list[JobRecord]:
    """The 300 jobs, placed by ``pack`` as in ``bench_crux_recompute.py``."""
    topo = two_layer_clos(**{k: v for k, v in TOPOLOGY.items() if k != "kind"})  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    free = set(topo.gpus)
    placed: list[PlacedJob] = []
    out: list[JobRecord] = []
    budget = topo.n_gpus
    for k in range(JOBS):
        left = JOBS - k
        size = int(rng.choice([s for s in SIZES if s <= max(1, (budget - left) // 2 + 1)] or [1]))
        profile = get_model(str(rng.choice(MODELS)))
        spec = JobSpec(id=JobId(f"j{k}"), profile=profile, gpus=size)
        alloc = pack(
            PlacementRequest(topology=topo, job=spec, free_gpus=frozenset(free), running=tuple(placed))
        )
        if alloc is None:
            break
        free.difference_update(alloc.gpus)
        budget -= size
        placed.append(PlacedJob(spec=spec, gpus=alloc.gpus))
        out.append(
            JobRecord(
                id=f"j{k}",
                gpus=tuple(map(str, alloc.gpus)),
                compute_s=profile.compute_s,
                comm_bytes=profile.sync_bytes,
                overlap=profile.overlap,
                started_s=float(k),
                profiling=False,
            )
        )
    return out


def start_daemon(db: Path, token_file: Path) -> tuple[subprocess.Popen[str], str]:
    code = "import sys; from commsched.cli.app import main; sys.argv[0] = 'commsched'; main()"
    p = subprocess.Popen(
        [
            sys.executable,
            "-c",
            code,
            "daemon",
            "--db",
            str(db),
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            str(token_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert p.stdout is not None
    m = re.match(r"listening on (\S+)", p.stdout.readline())
    if m is None:
        p.kill()
        raise SystemExit("the daemon did not start")
    return p, m.group(1)


def one_event(c: httpx.Client, w: httpx.Client, action: Callable[[], httpx.Response]) -> float:
    """Seconds from sending a job event (``action``) to a long-poll answer on ``w`` with the new version."""
    version = int(c.get("/health").json()["version"])
    got: dict[str, float] = {}

    def wait() -> None:
        r = w.get("/v1/decisions/latest", params={"after": version, "wait_s": 30, "host": "h0"})
        if int(r.json()["version"]) == version + 1:
            got["t"] = time.perf_counter()

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)  # the long-poll is parked in the daemon
    t0 = time.perf_counter()
    action().raise_for_status()
    waiter.join(timeout=60)
    return got["t"] - t0


def latencies(c: httpx.Client, w: httpx.Client, jobs: list[JobRecord]) -> dict[str, list[float]]:
    """First event after a restart (caches warm), job starts and ends (new ids), profile updates."""
    big = max(jobs, key=lambda j: len(j.gpus))
    t0 = time.perf_counter()
    while not c.get("/health").json()["caches_warm"]:  # the daemon warms its caches after a restart
        time.sleep(0.05)
    print(f"caches warm {time.perf_counter() - t0:.1f} s after the daemon answered")
    out: dict[str, list[float]] = {"first": [one_event(c, w, lambda: c.delete(f"/v1/jobs/{big.id}"))]}
    out["start/end"] = []
    for k in range(4):
        body = {"id": f"new{k}", "gpu_ids": list(big.gpus), "model": "gpt"}
        out["start/end"].append(one_event(c, w, lambda b=body: c.post("/v1/jobs", json=b)))  # type: ignore[misc]
        out["start/end"].append(one_event(c, w, lambda k=k: c.delete(f"/v1/jobs/new{k}")))  # type: ignore[misc]
    prof = {"compute_s": 0.2, "comm_bytes": 5e8, "period_s": 0.3}
    out["profile"] = [
        one_event(c, w, lambda j=j: c.put(f"/v1/jobs/{j.id}/profile", json=prof))  # type: ignore[misc]
        for j in jobs[1:4]
    ]
    return out


_REFERENCE = r"""
import asyncio, sys
BODY = b'{"version":1}'
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
RESP = HEAD % len(BODY) + BODY
class P(asyncio.Protocol):
    def connection_made(self, t): self.t, self.buf = t, b""
    def data_received(self, d):
        self.buf += d
        while b"\r\n\r\n" in self.buf:
            _, self.buf = self.buf.split(b"\r\n\r\n", 1)
            self.t.write(RESP)
async def main():
    srv = await asyncio.get_running_loop().create_server(P, "127.0.0.1", 0)
    print("listening on http://127.0.0.1:%d" % srv.sockets[0].getsockname()[1], flush=True)
    await srv.serve_forever()
asyncio.run(main())
"""


def start_reference() -> tuple[subprocess.Popen[str], str]:
    """A bare asyncio HTTP responder (fixed answer, keep-alive): what the machine allows a Python server."""
    p = subprocess.Popen([sys.executable, "-c", _REFERENCE], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    m = re.match(r"listening on (\S+)", p.stdout.readline())
    if m is None:
        p.kill()
        raise SystemExit("the reference server did not start")
    return p, m.group(1)


def _reader(url: str, hosts: list[str], seconds: float, threads: int, q: mp.Queue[int]) -> None:
    count = [0] * threads
    stop_at = time.perf_counter() + seconds

    def loop(i: int) -> None:
        with httpx.Client(base_url=url, timeout=10) as c:
            n = 0
            while time.perf_counter() < stop_at:
                r = c.get("/v1/decisions/latest", params={"host": hosts[(n * threads + i) % len(hosts)]})
                r.raise_for_status()
                n += 1
            count[i] = n

    ts = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    q.put(sum(count))


def read_rate(url: str, hosts: list[str], seconds: float = 3.0, procs: int = 2, threads: int = 4) -> float:
    ctx = mp.get_context("spawn")
    q: mp.Queue[int] = ctx.Queue()
    ps = [ctx.Process(target=_reader, args=(url, hosts, seconds, threads, q)) for _ in range(procs)]
    for p in ps:
        p.start()
    total = sum(q.get(timeout=seconds + 60) for _ in ps)
    for p in ps:
        p.join()
    return total / seconds  # each client thread counts the requests it completed in its own window


def main() -> None:
    jobs = seed_jobs()
    with tempfile.TemporaryDirectory(prefix="csd-bench-") as tmp:
        db, tok = Path(tmp) / "d.db", Path(tmp) / "tok"
        tok.write_text(TOKEN + "\n")
        store = Store(db)
        with store.atomic():
            store.put_config(ClusterConfig(topology=TOPOLOGY, policy="crux-full", heartbeat_timeout_s=0.0))
            for j in jobs:
                store.put_job(j)
        store.close()
        proc, url = start_daemon(db, tok)
        try:
            with (
                httpx.Client(base_url=url, headers=AUTH, timeout=60) as c,
                httpx.Client(base_url=url, timeout=60) as w,
            ):
                lat = latencies(c, w, jobs)
                doc = c.get("/v1/decisions/latest").json()
                hosts = sorted({h for info in doc["jobs"].values() for h in info["hosts"]})
                for h in hosts:  # every host view once (what agents fetch after a new version)
                    c.get("/v1/decisions/latest", params={"host": h}).raise_for_status()
            ref, ref_url = start_reference()
            try:
                rates, ref_rates = [], []
                for _ in range(3):  # interleaved, so both see the same machine load
                    rates.append(read_rate(url, hosts))
                    ref_rates.append(read_rate(ref_url, hosts))
            finally:
                ref.kill()
                ref.wait(timeout=20)
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    n_gpus = sum(len(j.gpus) for j in jobs)
    conns = len(doc["connections"])
    print(f"cluster: {len(jobs)} jobs on {n_gpus} of 2048 GPUs, {conns} inter-host connections")
    for name, xs in lat.items():
        med = statistics.median(xs)
        print(
            f"decision latency, {name} (event -> new version at a long-polling client), median of {len(xs)}: "
            f"{med * 1e3:.0f} ms (min {min(xs) * 1e3:.0f}, max {max(xs) * 1e3:.0f}); "
            f"target < {LATENCY_TARGET_S:.0f} s, ratio to target {med / LATENCY_TARGET_S:.2f}"
        )
    rps = statistics.median(rates)
    print(
        f"read API throughput (GET /v1/decisions/latest?host=H, 8 keep-alive clients), "
        f"median of {len(rates)}: "
        f"{rps:.0f} req/s (runs {', '.join(f'{r:.0f}' for r in rates)}); "
        f"target >= {READ_TARGET_RPS:.0f}, ratio to target {rps / READ_TARGET_RPS:.2f}"
    )
    ref_rps = statistics.median(ref_rates)
    print(
        f"reference: bare asyncio HTTP responder, same clients, same run: {ref_rps:.0f} req/s "
        f"(runs {', '.join(f'{r:.0f}' for r in ref_rates)}); daemon / reference {rps / ref_rps:.2f}"
    )


if __name__ == "__main__":
    main()
