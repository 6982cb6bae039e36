"""Run a job's real processes across a shaped link and measure it (``commsched ps bench``).

Servers and the scheduler live in the link's server namespace, workers in its worker namespace; each
worker runs the emulated model (:mod:`commsched.experiments.ps.emulate`). Before the jobs, raw TCP with one
flow per worker, both ways at once (pushes and pulls overlap), measures the link's goodput (best of
two probes), which is the capacity the model twin uses.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from commsched.experiments.ps.emulate import EmulatedLayer
from commsched.experiments.ps.predict import F32_BYTES, predicted_iteration_s
from commsched.runtime.launch.procs import Processes
from commsched.runtime.ps.errors import PSError, PSTimeoutError
from commsched.runtime.ps.transports import TransportConfig
from commsched.testbed.shaped_link import LoopbackLink, ShapedLink
from commsched.workload.records import LayerProfile

#: the runtime's scheduler and servers
PY_PS = [sys.executable, "-m", "commsched.runtime.ps"]
#: the experiment's emulated workers and goodput probes
PY_EXP = [sys.executable, "-m", "commsched.experiments.ps"]
#: how long a scheduler, a sink or a ring's rank 0 may take to print its port (s)
START_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    """What one measured job runs."""

    layers: tuple[EmulatedLayer, ...]
    num_workers: int = 2
    num_servers: int = 1
    iterations: int = 4
    warmup: int = 1
    seed: int = 0
    timeout_s: float = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRun:
    """A finished job: per-iteration times (slowest worker), start times, largest error against NumPy.

    ``started_s`` counts from ``origin_s`` (rank 0's ``time.perf_counter()`` at its first iteration).
    """

    transport: str
    iteration_s: tuple[float, ...]
    started_s: tuple[float, ...]
    max_abs_error: float
    origin_s: float = 0.0

    @property
    def median_s(self) -> float:
        xs = sorted(self.iteration_s)
        return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def _env(transport: TransportConfig, *, role: str, root: tuple[str, int], spec: JobSpec) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "DMLC_ROLE": role, "DMLC_PS_ROOT_URI": root[0], "DMLC_PS_ROOT_PORT": str(root[1]),
        "DMLC_NUM_WORKER": str(spec.num_workers), "DMLC_NUM_SERVER": str(spec.num_servers),
        "COMMSCHED_PS_TRANSPORT": transport.name, "COMMSCHED_PS_TIMEOUT": str(spec.timeout_s),
        "BYTEPS_PARTITION_BYTES": str(transport.partition_bytes),
        "COMMSCHED_PS_CREDIT_BYTES": str(transport.credit_bytes),
    })  # fmt: skip
    if transport.mark is not None:
        env["COMMSCHED_PS_DSCP"] = str(transport.mark.dscp)
    return env


def started_port(procs: Processes, name: str) -> str:
    """The port ``name`` prints first (a scheduler, a sink, rank 0 of a ring) once it listens."""
    port = procs.first_line(name, START_TIMEOUT_S)
    if port is None:
        raise PSError(f"{name} did not start: {procs.tail(name)}")
    return port


def collect_results(
    procs: Processes, names: Sequence[str], what: str, deadline: float
) -> list[dict[str, Any]]:
    """Each worker's (``names``) last printed line as JSON, waiting until ``deadline`` (monotonic seconds).

    Raises :class:`PSTimeoutError` for a worker still running then, :class:`PSError` for one that failed.
    """
    out = []
    for name in names:
        text = procs.output(name, max(1.0, deadline - time.monotonic()))
        if text is None:
            raise PSTimeoutError(f"{what}: a worker did not finish in time")
        code = procs.procs[name].returncode
        if code != 0:
            raise PSError(f"{what}: a worker exited with status {code}")
        out.append(json.loads(text.strip().splitlines()[-1]))
    return out


def measure_goodput(
    link: ShapedLink | LoopbackLink,
    *,
    flows: int,
    duration_s: float = 1.5,
    repeats: int = 1,
    both_ways: bool = False,
) -> float:
    """Raw TCP goodput (bits/s) worker side -> server side with ``flows`` parallel flows.

    With ``repeats`` > 1 the best of that many probes: the first probe on a new link reads a few
    per cent to 10 % low (measured), and a busy host only ever lowers a probe. With ``both_ways``
    the same flows run server -> worker at the same time and the result is the mean of the two
    directions: what each direction delivers while the other is busy too (pushes and pulls
    overlap), about 5 % below one direction alone on a 1 Gb/s shaped veth (the reverse traffic's
    TCP acknowledgements share each direction's shaper). Flow ``i`` runs between the server and
    worker address ``i`` (modulo the link's workers), so it uses that worker's leaf.
    """
    directions = (False, True) if both_ways else (False,)
    best = 0.0
    with ThreadPoolExecutor(max_workers=2) as pool:
        for _ in range(max(1, repeats)):
            futures = [
                pool.submit(_probe, link, flows=flows, duration_s=duration_s, reverse=r) for r in directions
            ]
            best = max(best, sum(f.result() for f in futures) / len(futures))
    return best


def _probe(link: ShapedLink | LoopbackLink, *, flows: int, duration_s: float, reverse: bool = False) -> float:
    """One probe: flow ``i`` between the server address and worker address ``i`` (its leaf)."""
    ips = link.worker_ips
    if reverse:
        sink_ns, sink_host, source_ns = link.worker_ns, "0.0.0.0", link.server_ns
    else:
        sink_ns, sink_host, source_ns = link.server_ns, link.server_ip, link.worker_ns
    procs = Processes(None)
    try:
        procs.start("sink", link.argv(sink_ns, [*PY_EXP, "sink", sink_host, str(flows), str(duration_s)]),
                    capture_stdout=True)  # fmt: skip
        port = started_port(procs, "sink")
        for i in range(flows):
            ends = [ips[i % len(ips)], port, str(duration_s + 0.5)]
            if not reverse:
                ends = [link.server_ip, port, str(duration_s + 0.5), ips[i % len(ips)]]
            procs.start(f"source-{i}", link.argv(source_ns, [*PY_EXP, "source", *ends]))
        out = procs.output("sink", duration_s + 30)
        if out is None:
            raise PSError("the goodput probe failed: the sink did not finish in time")
        return float(json.loads(out.strip().splitlines()[-1])["goodput_bps"])
    except (ValueError, KeyError, IndexError) as exc:
        raise PSError(f"the goodput probe failed: {exc}") from None
    finally:
        procs.close()


def run_job(
    link: ShapedLink | LoopbackLink,
    transport: TransportConfig,
    spec: JobSpec,
    *,
    during: Callable[[threading.Event], None] | None = None,
) -> JobRun:
    """Run scheduler, servers and workers of one job; ``during`` runs in a thread meanwhile."""
    procs = Processes(None)
    with tempfile.TemporaryDirectory(prefix="csp") as tmp:
        path = os.path.join(tmp, "spec.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"layers": [asdict(ly) for ly in spec.layers], "iterations": spec.iterations,
                       "warmup": spec.warmup, "seed": spec.seed}, fh)  # fmt: skip
        stop = threading.Event()
        helper: threading.Thread | None = None
        try:
            env = _env(transport, role="scheduler", root=(link.server_ip, 0), spec=spec)
            argv = link.argv(link.server_ns, [*PY_PS, "scheduler", link.server_ip])
            procs.start("scheduler", argv, capture_stdout=True, env=env)
            root = (link.server_ip, int(started_port(procs, "scheduler") or 0))
            for i in range(spec.num_servers):
                env = _env(transport, role="server", root=root, spec=spec)
                procs.start(f"server-{i}", link.argv(link.server_ns, [*PY_PS, "role"]), env=env)
            workers = []
            for rank in range(spec.num_workers):
                env = {**_env(transport, role="worker", root=root, spec=spec), "DMLC_WORKER_ID": str(rank),
                       "DMLC_NODE_HOST": link.worker_ips[rank % len(link.worker_ips)]}  # fmt: skip
                argv = link.argv(link.worker_ns, [*PY_EXP, "emulate", path])
                procs.start(f"worker-{rank}", argv, env=env, capture_stdout=True)
                workers.append(f"worker-{rank}")
            helper = threading.Thread(target=during, args=(stop,), daemon=True) if during else None
            if helper is not None:
                helper.start()
            deadline = time.monotonic() + spec.timeout_s * (spec.iterations + spec.warmup + 2)
            results = collect_results(procs, workers, transport.name, deadline)
        finally:
            stop.set()
            if helper is not None:
                helper.join(30)  # it restores the link's rate: done before the link may go away
            procs.close()
    per_iter = [max(r["iteration_s"][i] for r in results) for i in range(spec.iterations)]
    return JobRun(
        transport=transport.name,
        iteration_s=tuple(per_iter),
        started_s=tuple(results[0]["started_s"]),
        max_abs_error=max(float(r["max_abs_error"]) for r in results),
        origin_s=float(results[0].get("origin_s", 0.0)),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TransportResult:
    """One transport of a comparison: measured and predicted iteration time, largest sum error."""

    transport: str
    iteration_s: float
    predicted_iteration_s: float
    max_abs_error: float
    series_s: tuple[float, ...]


def emulated_layers(layers: Sequence[LayerProfile], *, byte_scale: float) -> tuple[EmulatedLayer, ...]:
    """A zoo per-layer profile as emulated layers, gradient bytes scaled by ``byte_scale`` (float32).

    Examples
    --------
    >>> from commsched.workload import LayerProfile
    >>> emulated_layers([LayerProfile(name="fc", forward_s=0.1, backward_s=0.2, param_bytes=4e6)],
    ...                 byte_scale=0.5)[0].elements
    500000
    """
    # bytes -> float32 elements
    return tuple(
        EmulatedLayer(name=lp.name, elements=round(lp.param_bytes * byte_scale / F32_BYTES),
                      fp_s=lp.forward_s, bp_s=lp.backward_s)
        for lp in layers
    )  # fmt: skip


def compare_transports(
    link: ShapedLink | LoopbackLink, transports: Sequence[TransportConfig], spec: JobSpec
) -> tuple[float, list[TransportResult]]:
    """Measure the link's goodput, then each transport's job beside its model twin.

    Returns the per-worker goodput (bits/s) and one result per transport.
    """
    goodput = measure_goodput(link, flows=spec.num_workers, repeats=2, both_ways=True) / spec.num_workers
    out = []
    for cfg in transports:
        run = run_job(link, cfg, spec)
        out.append(
            TransportResult(
                transport=cfg.name,
                iteration_s=run.median_s,
                predicted_iteration_s=predicted_iteration_s(spec.layers, bandwidth_bps=goodput, config=cfg),
                max_abs_error=run.max_abs_error,
                series_s=run.iteration_s,
            )
        )
    return goodput, out
