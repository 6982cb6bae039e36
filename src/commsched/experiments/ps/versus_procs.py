"""The processes of :mod:`.versus_ring`'s comparison, run inside the star's host namespaces.

``python -m commsched.experiments.ps.versus_procs server INDEX SPEC | byteps SPEC | ring SPEC RANK HOST
[STORE]``: a BytePS summation server (paced by its share of the NIC's bytes), a BytePS worker that
pushes and pulls every tensor each iteration, or a ring all-reduce worker (the first one serves the
store and prints its port). Workers print their iteration times as JSON.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from commsched.errors import CommschedError, InputError
from commsched.experiments.ps.emulate import BARRIER, gradient
from commsched.experiments.ps.versus_ring import VersusSpec
from commsched.runtime.ps.errors import error_exit_code
from commsched.runtime.ps.pacing import SharePacing


def _load(path: str) -> tuple[VersusSpec, float]:
    """The spec and the NIC goodput measured before the job (bits/s; the pacing rates are shares of it)."""
    with open(path, encoding="utf-8") as fh:
        raw = json.load(fh)
    return VersusSpec(**raw["spec"]), float(raw["goodput_bps"])


def _server(index: int, plan: SharePacing | None) -> None:
    from commsched.runtime.ps.launch import register_server
    from commsched.runtime.ps.roles import role_from_env
    from commsched.runtime.ps.server import Server, run_server

    env = role_from_env()
    pacing = dict(enumerate(plan.reply_bytes_s[index])) if plan is not None else None
    server = Server(num_workers=env.num_workers, host=env.node_host or "0.0.0.0", mark=env.transport.mark,
                    pacing_bytes_s=pacing)  # fmt: skip
    server.start()
    try:
        register_server(env, server, index=index)
    except BaseException:
        server.stop()
        raise
    run_server(server)


def _byteps_worker(spec: VersusSpec, plan: SharePacing | None) -> dict[str, object]:
    """Push/pull every tensor each iteration (each worker from tensor 0, or staggered by rank)."""
    from commsched.runtime.ps.client import PSClient
    from commsched.runtime.ps.rendezvous import worker_assignment
    from commsched.runtime.ps.roles import role_from_env

    env = role_from_env()
    layers = spec.layers()
    a = worker_assignment(env.root, rank=env.rank, timeout_s=env.timeout_s)
    client = PSClient(servers=a.servers, rank=a.rank, num_workers=env.num_workers, transport=env.transport,
                      server_map=spec.server_map(), timeout_s=env.timeout_s, source=env.node_host,
                      pacing_bytes_s=plan.push_bytes_s[a.rank] if plan is not None else None)  # fmt: skip
    rank, t = a.rank, len(layers)
    grads = [gradient(spec.seed, rank, i, ly.elements) for i, ly in enumerate(layers)]
    ref = [sum((gradient(spec.seed, r, i, ly.elements) for r in range(spec.workers)), np.zeros(1, np.float32))
           for i, ly in enumerate(layers)]  # fmt: skip
    for ly in layers:  # the same declared keys on every worker, whatever order it sends in
        client.declare(ly.name)
    first = rank * t // spec.workers if spec.stagger else 0
    order = [(first + j) % t for j in range(t)]
    times: list[float] = []
    starts: list[float] = []
    err = 0.0
    try:
        origin = time.perf_counter()
        for it in range(spec.iterations + spec.warmup):
            if it:  # every iteration starts on all workers together (see commsched.experiments.ps.emulate)
                client.push_pull(np.zeros(1, np.float32), name=BARRIER, timeout_s=env.timeout_s)
            t0 = time.perf_counter()
            handles = [(i, client.push_pull_async(grads[i], name=layers[i].name)) for i in order]
            outs = [(i, h.wait(env.timeout_s)) for i, h in handles]
            if it >= spec.warmup:
                times.append(time.perf_counter() - t0)
                starts.append(t0 - origin)
            err = max(err, *(float(np.max(np.abs(out - ref[i]))) for i, out in outs))
    finally:
        client.close()
    return {"rank": rank, "iteration_s": times, "started_s": starts, "max_abs_error": err}


def _ring_worker(spec: VersusSpec, rank: int, host: str, store: str | None) -> dict[str, object]:
    from commsched.runtime.transport import Options, StoreServer, init

    layers = spec.layers()
    grads = [gradient(spec.seed, rank, i, ly.elements) for i, ly in enumerate(layers)]
    flat_ref = np.concatenate(grads)
    ref = sum((np.concatenate([gradient(spec.seed, r, i, ly.elements) for i, ly in enumerate(layers)])
               for r in range(spec.workers)), np.zeros(1, np.float32))  # fmt: skip
    server = StoreServer(host=host) if store is None else None
    try:
        if server is not None:
            print(server.address[1], flush=True)
            address = server.address
        else:
            h, _, p = store.rpartition(":")  # type: ignore[union-attr]
            address = (h, int(p))
        opts = Options(host=host, timeout_s=spec.timeout_s, rendezvous_timeout_s=spec.timeout_s)
        times: list[float] = []
        starts: list[float] = []
        err = 0.0
        with init(job="versus-ring", rank=rank, world_size=spec.workers, store=address, options=opts) as comm:
            origin = time.perf_counter()
            for it in range(spec.iterations + spec.warmup):
                buf = flat_ref.copy()
                t0 = time.perf_counter()
                comm.all_reduce(buf)
                if it >= spec.warmup:
                    times.append(time.perf_counter() - t0)
                    starts.append(t0 - origin)
                err = max(err, float(np.max(np.abs(buf - ref))))
            comm.all_reduce(np.zeros(1, np.float32))  # nobody leaves while a peer still reads
    finally:
        if server is not None:
            server.close()
    return {"rank": rank, "iteration_s": times, "started_s": starts, "max_abs_error": err}


def _run(argv: list[str]) -> None:
    if argv[:1] == ["server"] and len(argv) == 3:
        spec, goodput_bps = _load(argv[2])
        _server(int(argv[1]), spec.pacing_plan(goodput_bps))
    elif argv[:1] == ["byteps"] and len(argv) == 2:
        spec, goodput_bps = _load(argv[1])
        print(json.dumps(_byteps_worker(spec, spec.pacing_plan(goodput_bps))))
    elif argv[:1] == ["ring"] and len(argv) in (4, 5):
        res = _ring_worker(_load(argv[1])[0], int(argv[2]), argv[3], argv[4] if len(argv) == 5 else None)
        print(json.dumps(res))
    else:
        expected = "server INDEX SPEC | byteps SPEC | ring SPEC RANK HOST [STORE]"
        raise InputError(" ".join(argv) or "nothing", where="arguments", expected=expected)


def main(argv: list[str]) -> int:
    """Run one process of a comparison; errors print one line on stderr (exit 2 for bad input, else 1)."""
    try:
        _run(argv)
    except CommschedError as exc:
        return error_exit_code(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
