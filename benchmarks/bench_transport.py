"""Benchmark: ring all-reduce over commsched's transport against raw Python TCP, on loopback.

Four rank processes (``--ranks``) run, alternately (the order flips every repeat) and ``--repeats``
times each:

* **raw**: every rank sends ``B`` bytes to the next rank of the ring with plain ``sendall`` (4 MiB
  pieces, on a thread) while it receives ``B`` bytes from the previous one with ``recv_into`` into a
  preallocated buffer: the best a Python process moves over one TCP connection here, with the same
  pattern of concurrent links;
* **all-reduce**: ``commsched`` ring all-reduce of a ``--size-mib`` float32 buffer (256 MiB), in which
  each rank sends ``B = 2(n-1)/n`` of the buffer (framing, NumPy summation and step synchronisation
  included).

Each figure is the per-link rate ``B / time`` (the slowest rank's time), median over the repeats; the
ratio all-reduce / raw is the acceptance figure (target >= 0.60). The result of every all-reduce is
checked. Timings on a shared machine are noisy: compare the ratio, measured in the same run.

Run: ``.venv/bin/python benchmarks/bench_transport.py [--ranks 4] [--size-mib 256] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import socket
import statistics
import threading
import time
from typing import Any

import numpy as np

from commsched.runtime import Options, StoreServer, init
from commsched.runtime.transport.rendezvous import StoreClient

TARGET = 0.60
PIECE = 4 << 20


def _barrier(store: StoreClient, name: str, rank: int, n: int) -> None:
    store.set(f"{name}/{rank}", "1")
    for r in range(n):
        store.get(f"{name}/{r}")


def _raw_round(out_sock: socket.socket, in_sock: socket.socket, nbytes: int, buf: bytearray) -> float:
    data = memoryview(bytes(min(nbytes, PIECE)))

    def sender() -> None:
        left = nbytes
        while left:
            k = min(left, len(data))
            out_sock.sendall(data[:k])
            left -= k

    view = memoryview(buf)
    t0 = time.perf_counter()
    th = threading.Thread(target=sender)
    th.start()
    got = 0
    while got < nbytes:
        got += in_sock.recv_into(view[: min(len(view), nbytes - got)])
    th.join()
    return time.perf_counter() - t0


def _worker(rank: int, n: int, store_addr: tuple[str, int], size_mib: int, repeats: int, *, q: Any) -> None:
    store = StoreClient(store_addr, timeout_s=600)
    elems = (size_mib << 20) // 4
    per_link = 2 * (n - 1) * (elems // n) * 4  # bytes a rank sends in a ring all-reduce (B)
    # raw ring connections
    lst = socket.create_server(("127.0.0.1", 0))
    store.set(f"raw/{rank}", json.dumps(lst.getsockname()[:2]))
    nxt = json.loads(store.get(f"raw/{(rank + 1) % n}"))
    out_sock = socket.create_connection(tuple(nxt))
    in_sock, _ = lst.accept()
    for s in (out_sock, in_sock):  # the same socket options as commsched's connections
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(600)
    buf = bytearray(PIECE)
    comm = init(job="csx-bench", rank=rank, world_size=n, store=store_addr, options=Options(timeout_s=600))
    x = np.empty(elems, dtype=np.float32)
    comm.all_reduce(np.ones(1024, dtype=np.float32))  # open the ring's connections
    raw_t, ar_t = [], []
    for i in range(repeats):
        for kind in ("raw", "ar") if i % 2 == 0 else ("ar", "raw"):  # alternate the order
            x.fill(rank + 1)
            _barrier(store, f"{kind}-{i}", rank, n)
            if kind == "raw":
                raw_t.append(_raw_round(out_sock, in_sock, per_link, buf))
                continue
            t0 = time.perf_counter()
            comm.all_reduce(x)
            ar_t.append(time.perf_counter() - t0)
            if not (x[0] == x[-1] == n * (n + 1) / 2 and x[elems // 2] == x[0]):
                raise SystemExit(f"rank {rank}: wrong all-reduce result {x[0]}")
    q.put((rank, per_link, raw_t, ar_t))
    _barrier(store, "done", rank, n)
    comm.close()
    out_sock.close()
    in_sock.close()
    lst.close()
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with StoreServer() as store:
        procs = [
            ctx.Process(
                target=_worker,
                args=(r, args.ranks, store.address, args.size_mib, args.repeats),
                kwargs={"q": q},
            )
            for r in range(args.ranks)
        ]
        for p in procs:
            p.start()
        rows = [q.get(timeout=1800) for _ in procs]
        for p in procs:
            p.join(60)
    per_link = rows[0][1]
    raw = [max(r[2][i] for r in rows) for i in range(args.repeats)]
    ar = [max(r[3][i] for r in rows) for i in range(args.repeats)]
    raw_rate = per_link / statistics.median(raw) / 1e9  # bytes/s -> GB/s
    ar_rate = per_link / statistics.median(ar) / 1e9
    ratio = ar_rate / raw_rate
    print(f"ring all-reduce of {args.size_mib} MiB float32 among {args.ranks} ranks on loopback")
    print(f"  bytes sent per rank (2(n-1)/n of the buffer): {per_link / 2**20:.0f} MiB")
    for name, rate, times in (("raw Python TCP ring ", raw_rate, raw), ("commsched all-reduce", ar_rate, ar)):
        print(f"  {name}: {rate:.2f} GB/s per link  (times {', '.join(f'{t:.2f}' for t in times)} s)")
    verdict = "met" if ratio >= TARGET else "NOT met"
    print(f"  ratio all-reduce / raw = {ratio:.2f}  (target >= {TARGET:.2f}: {verdict})")


if __name__ == "__main__":
    main()
