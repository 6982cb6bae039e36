"""BytePS with ``k`` CPU machines against the ring all-reduce on the same machines, measured.

``n`` worker (GPU) hosts and ``k`` CPU-only hosts sit on a one-switch star
(:mod:`commsched.testbed.star`), every NIC shaped to the same rate both ways. Two jobs move the same
``model_bytes`` of float32 gradients per iteration among the ``n`` workers:

* **BytePS**: a server co-located on every worker host plus one on each CPU host; parts go to the
  servers by the mixed-mode split (a fraction ``2k(n-1)/(n^2+kn-2k)`` to the CPU servers,
  :class:`~commsched.runtime.ps.keys.ServerMap`); every worker pushes and pulls the whole model.
* **all-reduce**: :mod:`commsched.runtime`'s ring all-reduce among the ``n`` worker hosts (the CPU
  hosts idle).

With ``VersusSpec(pacing=True)`` (the default) every BytePS connection that crosses a NIC is paced to
its share of the NIC's bytes (:mod:`commsched.runtime.ps.pacing`), the schedule ``commsched byteps``
assumes. Before the jobs one raw TCP flow between two worker hosts measures the NIC goodput; the model's
speed-up (``commsched byteps``: ``(n^2+kn-2k)/n^2``) and its times at that goodput stand beside the
measured medians. Every returned sum is checked against the NumPy sum of all workers' gradients.

Process entry points (run inside the host namespaces): ``python -m commsched.experiments.ps.versus_procs
server INDEX SPEC.json | byteps SPEC.json | ring SPEC.json RANK HOST [STORE_PORT]``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

from commsched.errors import InputError
from commsched.experiments.ps.bench import JobRun, collect_results, started_port
from commsched.experiments.ps.emulate import EmulatedLayer
from commsched.intrajob.byteps import byteps_assignment, byteps_times
from commsched.runtime.launch.procs import Processes
from commsched.runtime.ps.errors import PSError
from commsched.runtime.ps.keys import PART_BYTES, ServerMap, part_bounds, part_key
from commsched.runtime.ps.pacing import SharePacing, share_pacing
from commsched.testbed.fabric import star_fabric
from commsched.testbed.star import StarFabric

PY_PS = [sys.executable, "-m", "commsched.runtime.ps"]
PY_VR = [sys.executable, "-m", "commsched.experiments.ps.versus_procs"]
PY_EXP = [sys.executable, "-m", "commsched.experiments.ps"]
F32_BYTES = 4
#: NIC queue of the star, bytes: a switch port's share of buffer. The 5 ms queue of ``shaped_link``
#: (256 KiB at 0.1 Gb/s) tail-drops the n-to-1 incast of BytePS pushes (measured: 328 retransmitted
#: segments and 2 RTOs in 4 iterations against 5 and 0 with this queue, iteration 1.7 s against 1.3 s)
QUEUE_BYTES = 4_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class VersusSpec:
    """One comparison: ``workers`` GPU hosts, ``cpu_machines`` CPU hosts, bytes per iteration."""

    workers: int = 4
    cpu_machines: int = 2
    model_bytes: int = 24_000_000
    tensors: int = 24
    iterations: int = 5
    warmup: int = 1
    seed: int = 0
    timeout_s: float = 60.0
    stagger: bool = False
    #: pace every BytePS connection by its share of its NICs' bytes (:mod:`commsched.runtime.ps.pacing`);
    #: measured at n=4, k=2, 16 MB: 0.88 s per iteration against 1.16 s unpaced at 0.2 Gb/s
    pacing: bool = True
    #: factor on every pacing rate (:func:`commsched.runtime.ps.pacing.share_pacing`; 1 measured best)
    pacing_headroom: float = 1.0

    def __post_init__(self) -> None:
        if self.workers < 2 or self.cpu_machines < 1:
            raise InputError(f"n={self.workers}, k={self.cpu_machines}", where="--workers/--cpu-machines",
                             expected="at least 2 workers and 1 CPU machine")  # fmt: skip
        if self.model_bytes < F32_BYTES * self.tensors or self.tensors < 1 or self.iterations < 1:
            raise InputError(f"{self.model_bytes} bytes in {self.tensors} tensors", where="--mbytes",
                             expected="at least 4 bytes per tensor and one iteration")  # fmt: skip

    def layers(self) -> tuple[EmulatedLayer, ...]:
        """The model as ``tensors`` equal float32 tensors without compute (communication only)."""
        each = self.model_bytes // F32_BYTES // self.tensors
        return tuple(
            EmulatedLayer(name=f"t{i}", elements=each, fp_s=0.0, bp_s=0.0) for i in range(self.tensors)
        )

    def server_map(self) -> ServerMap:
        """BytePS mixed mode: CPU servers ``0..k-1``, then the co-located ones."""
        n, k = self.workers, self.cpu_machines
        return ServerMap(num_servers=n + k, mode="mixed", cpu_servers=k, num_workers=n)

    def cpu_share(self) -> float:
        """Fraction of the model's bytes the mixed-mode hash sends to the CPU servers (these tensors)."""
        return sum(self.shares()[: self.cpu_machines])

    def split_speedup(self) -> float:
        """The model's speed-up over all-reduce for the split the hash actually makes of these tensors.

        The busiest NIC decides: a CPU host with share ``s`` carries ``n s M`` each way, a worker host
        ``M + (n-2) s M`` (``commsched byteps``'s traffic with the measured shares in place of Eq. 1-2).
        """
        n, k, sh = self.workers, self.cpu_machines, self.shares()
        busiest = max(n * max(sh[:k]), 1 + (n - 2) * max(sh[k:]))
        return 2 * (n - 1) / n / busiest

    def shares(self) -> list[float]:
        """Each server's share of the model's bytes under the mixed-mode hash (CPU servers first)."""
        parts = [
            (part_key(i, p), b - a)
            for i, ly in enumerate(self.layers())
            for p, (a, b) in enumerate(part_bounds(ly.elements * F32_BYTES, PART_BYTES, F32_BYTES))
        ]
        return self.server_map().byte_shares(parts)

    def pacing_plan(self, goodput_bps: float) -> SharePacing | None:
        """The BytePS connections' pacing rates at NIC goodput ``goodput_bps`` (``None``: unpaced)."""
        if not self.pacing:
            return None
        return share_pacing(self.shares(), workers=self.workers, cpu_machines=self.cpu_machines,
                            goodput_bps=goodput_bps, headroom=self.pacing_headroom)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class VersusResult:
    """Both jobs' per-iteration times beside ``commsched byteps``'s model at the measured goodput."""

    spec: VersusSpec
    rate_bps: float
    goodput_bps: float
    byteps: JobRun
    allreduce: JobRun

    @property
    def measured_speedup(self) -> float:
        """Median all-reduce iteration over median BytePS iteration (> 1: BytePS faster)."""
        return self.allreduce.median_s / self.byteps.median_s

    def _times(self) -> tuple[float, float, float]:
        a = byteps_assignment(gpu_machines=self.spec.workers, cpu_machines=self.spec.cpu_machines,
                              model_bytes=self.spec.model_bytes)  # fmt: skip
        t = byteps_times(a, bandwidth_bps=self.goodput_bps)
        return t.speedup_vs_allreduce, t.byteps_s, t.allreduce_s

    @property
    def predicted_speedup(self) -> float:
        """``commsched byteps``'s speed-up over all-reduce: ``(n^2+kn-2k)/n^2``."""
        return self._times()[0]

    def summary(self) -> dict[str, object]:
        """The JSON figures of ``commsched ps versus-ring``."""
        speedup, t_b, t_a = self._times()
        return {
            "workers": self.spec.workers, "cpu_machines": self.spec.cpu_machines,
            "model_bytes": self.spec.model_bytes, "tensors": self.spec.tensors,
            "rate_gbps": self.rate_bps / 1e9, "goodput_gbps": self.goodput_bps / 1e9,
            "cpu_share": self.spec.cpu_share(), "paced": self.spec.pacing,
            "byteps": {"median_iteration_s": self.byteps.median_s, "predicted_iteration_s": t_b,
                       "series_s": list(self.byteps.iteration_s), "max_abs_error": self.byteps.max_abs_error},
            "allreduce": {"median_iteration_s": self.allreduce.median_s, "predicted_iteration_s": t_a,
                          "series_s": list(self.allreduce.iteration_s),
                          "max_abs_error": self.allreduce.max_abs_error},
            "measured_speedup": self.measured_speedup, "predicted_speedup": speedup,
            "predicted_speedup_this_split": self.spec.split_speedup(),
        }  # fmt: skip


def _write_spec(tmp: str, spec: VersusSpec, goodput_bps: float = 0.0) -> str:
    path = os.path.join(tmp, "spec.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump({"spec": asdict(spec), "goodput_bps": goodput_bps}, fh)
    return path


def _job_run(name: str, results: list[dict[str, Any]], iterations: int) -> JobRun:
    per_iter = [max(float(r["iteration_s"][i]) for r in results) for i in range(iterations)]
    return JobRun(
        transport=name,
        iteration_s=tuple(per_iter),
        started_s=tuple(float(s) for s in results[0]["started_s"]),
        max_abs_error=max(float(r["max_abs_error"]) for r in results),
    )


def _deadline(spec: VersusSpec) -> float:
    return time.monotonic() + spec.timeout_s * (spec.iterations + spec.warmup + 2)


def run_byteps(fab: StarFabric, spec: VersusSpec, *, goodput_bps: float) -> JobRun:
    """BytePS: scheduler on worker host 0, a server on every host, ``n`` workers (mixed-mode split);
    with ``spec.pacing`` every connection paced by its share of ``goodput_bps`` per NIC."""
    n, k = spec.workers, spec.cpu_machines
    procs = Processes(None)
    with tempfile.TemporaryDirectory(prefix=fab.hub_ns[:-1]) as tmp:
        path = _write_spec(tmp, spec, goodput_bps)
        base = {**os.environ, "DMLC_NUM_WORKER": str(n), "DMLC_NUM_SERVER": str(n + k),
                "COMMSCHED_PS_TRANSPORT": "fifo", "COMMSCHED_PS_TIMEOUT": str(spec.timeout_s)}  # fmt: skip
        try:
            env = {
                **base,
                "DMLC_ROLE": "scheduler",
                "DMLC_PS_ROOT_URI": fab.host_ip[0],
                "DMLC_PS_ROOT_PORT": "0",
            }
            procs.start("scheduler", fab.argv(0, [*PY_PS, "scheduler", fab.host_ip[0]]), env=env,
                        capture_stdout=True)  # fmt: skip
            base.update(
                {"DMLC_PS_ROOT_URI": fab.host_ip[0], "DMLC_PS_ROOT_PORT": started_port(procs, "scheduler")}
            )
            # hosts 0..n-1 are the workers, n..n+k-1 the CPU machines; CPU servers take indices 0..k-1
            for index, host in [*((j, n + j) for j in range(k)), *((k + i, i) for i in range(n))]:
                env = {**base, "DMLC_ROLE": "server", "DMLC_NODE_HOST": fab.host_ip[host]}
                procs.start(f"server-{index}", fab.argv(host, [*PY_VR, "server", str(index), path]), env=env)
            workers = []
            for rank in range(n):
                env = {**base, "DMLC_ROLE": "worker", "DMLC_WORKER_ID": str(rank),
                       "DMLC_NODE_HOST": fab.host_ip[rank]}  # fmt: skip
                procs.start(f"worker-{rank}", fab.argv(rank, [*PY_VR, "byteps", path]), env=env,
                            capture_stdout=True)  # fmt: skip
                workers.append(f"worker-{rank}")
            results = collect_results(procs, workers, "byteps", _deadline(spec))
        finally:
            procs.close()
    return _job_run("byteps", results, spec.iterations)


def run_allreduce(fab: StarFabric, spec: VersusSpec) -> JobRun:
    """The ring all-reduce of the same tensors among the ``n`` worker hosts (rank 0 holds the store)."""
    procs = Processes(None)
    with tempfile.TemporaryDirectory(prefix=fab.hub_ns[:-1]) as tmp:
        path = _write_spec(tmp, spec)
        try:
            procs.start(
                "worker-0", fab.argv(0, [*PY_VR, "ring", path, "0", fab.host_ip[0]]), capture_stdout=True
            )
            port = started_port(procs, "worker-0")
            workers = ["worker-0"]
            for rank in range(1, spec.workers):
                argv = [*PY_VR, "ring", path, str(rank), fab.host_ip[rank], f"{fab.host_ip[0]}:{port}"]
                procs.start(f"worker-{rank}", fab.argv(rank, argv), capture_stdout=True)
                workers.append(f"worker-{rank}")
            results = collect_results(procs, workers, "allreduce", _deadline(spec))
        finally:
            procs.close()
    return _job_run("allreduce", results, spec.iterations)


def measure_nic_goodput(fab: StarFabric, *, duration_s: float = 1.5) -> float:
    """Raw TCP goodput (bits/s) of one flow from host 1 to host 0 (one NIC each way)."""
    procs = Processes(None)
    try:
        procs.start("sink", fab.argv(0, [*PY_EXP, "sink", fab.host_ip[0], "1", str(duration_s)]),
                    capture_stdout=True)  # fmt: skip
        port = started_port(procs, "sink")
        procs.start("source", fab.argv(1, [*PY_EXP, "source", fab.host_ip[0], port, str(duration_s + 0.5)]))
        out = procs.output("sink", duration_s + 30)
        if out is None:
            raise PSError("the goodput probe failed: the sink did not finish in time")
        return float(json.loads(out.strip().splitlines()[-1])["goodput_bps"])
    except (ValueError, KeyError, IndexError) as exc:
        raise PSError(f"the goodput probe failed: {exc}") from None
    finally:
        procs.close()


def versus_ring(spec: VersusSpec, *, rate_bps: float, prefix: str = "cs6") -> VersusResult:
    """Build the star (``n + k`` hosts at ``rate_bps``), measure the goodput, run both jobs."""
    hosts = spec.workers + spec.cpu_machines
    with star_fabric(rate_bps, hosts=hosts, prefix=prefix, queue_bytes=QUEUE_BYTES) as fab:
        goodput = measure_nic_goodput(fab)
        byteps = run_byteps(fab, spec, goodput_bps=goodput)
        allreduce = run_allreduce(fab, spec)
    return VersusResult(spec=spec, rate_bps=rate_bps, goodput_bps=goodput, byteps=byteps, allreduce=allreduce)
