"""BytePS inter-machine communication (OSDI'20 §4.1): the optimal CPU/GPU summation split, its time and
speed-ups, and tensor partitioning with consistent hashing onto the summation services.

Notation: ``n`` GPU machines, ``k`` CPU machines, model size ``M`` bytes, NIC bandwidth ``B`` per
machine (full duplex, full-bisection network), ``D = n^2 + kn - 2k``.

Reading choices (stated once here):

* ``M_SSCPU`` / ``M_SSGPU`` are the bytes of the model *space* each summation service owns (Eq. 5:
  ``M = k M_SSCPU + n M_SSGPU``). A CPU machine therefore receives ``M_SSCPU`` from each of the ``n``
  GPU machines and sends the sums back: ``n M_SSCPU`` bytes each way, time ``t_c = n M_SSCPU / B``.
  (The summary's Eq. 4 reads ``t_c = M_SSCPU / B``; only ``n M_SSCPU`` makes ``t_c = t_g`` at the
  optimum and gives Eq. 6.)
* A GPU machine sends (and receives) ``M + (n - 2) M_SSGPU`` bytes (Eq. 3): its CS exchanges
  ``M - M_SSGPU`` with remote services and its SS exchanges ``(n - 1) M_SSGPU`` with the other CSes.
* ``k = 0`` is all-reduce (``M_SSGPU = M / n``), ``k = n`` is non-colocated PS (``M_SSGPU = 0``,
  ``M_SSCPU = M / n``); more than ``n`` CPU machines do not help (§4.1.1), so only ``min(k, n)`` are
  used.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from commsched.errors import InputError

#: largest partition of a tensor (BytePS §4.1: "parts of at most 4 MB"), bytes
DEFAULT_PART_BYTES = 4e6
#: bits per byte (bytes <-> bits conversions)
BITS_PER_BYTE = 8.0


def _check_machines(n: int, k: int) -> None:
    if n < 2:
        raise InputError(f"{n} GPU machines", where="gpu_machines", expected="at least 2")
    if k < 0:
        raise InputError(f"{k} CPU machines", where="cpu_machines", expected="at least 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class BytePSAssignment:
    """The optimal workload split of BytePS (Eq. 1-2) and the per-machine traffic it implies.

    Traffic is per machine and per direction (sent = received under the symmetric split).
    """

    gpu_machines: int
    cpu_machines: int
    cpu_machines_used: int
    model_bytes: float
    ss_cpu_bytes: float
    ss_gpu_bytes: float
    gpu_machine_traffic_bytes: float
    cpu_machine_traffic_bytes: float

    @property
    def slots(self) -> int:
        """``D = n^2 + kn - 2k``, the consistent-hashing range (with ``k`` the machines used)."""
        n, k = self.gpu_machines, self.cpu_machines_used
        return n * n + k * n - 2 * k

    @property
    def mode(self) -> str:
        """``allreduce`` (k = 0), ``ps`` (k = n) or ``byteps``."""
        if self.cpu_machines_used == 0:
            return "allreduce"
        return "ps" if self.cpu_machines_used == self.gpu_machines else "byteps"


def byteps_assignment(*, gpu_machines: int, cpu_machines: int, model_bytes: float) -> BytePSAssignment:
    """``M_SSCPU = 2(n-1) M / D`` and ``M_SSGPU = (n-k) M / D`` (BytePS Eq. 1-2), with traffic (Eq. 3-4).

    Examples
    --------
    >>> a = byteps_assignment(gpu_machines=4, cpu_machines=0, model_bytes=100.0)
    >>> a.mode, a.ss_gpu_bytes, a.gpu_machine_traffic_bytes   # ring all-reduce: 2(n-1)M/n
    ('allreduce', 25.0, 150.0)
    >>> a = byteps_assignment(gpu_machines=4, cpu_machines=4, model_bytes=100.0)
    >>> a.mode, a.ss_cpu_bytes, a.gpu_machine_traffic_bytes, a.cpu_machine_traffic_bytes  # PS
    ('ps', 25.0, 100.0, 100.0)

    References
    ----------
    BytePS (Jiang et al., OSDI 2020), §4.1, Eq. (1)-(5).
    """
    _check_machines(gpu_machines, cpu_machines)
    if not (math.isfinite(model_bytes) and model_bytes >= 0):
        raise InputError(f"model size {model_bytes!r}", where="model_bytes", expected="bytes >= 0")
    n, k = gpu_machines, min(cpu_machines, gpu_machines)
    d = n * n + k * n - 2 * k
    ss_cpu = 2 * (n - 1) * model_bytes / d if k > 0 else 0.0
    ss_gpu = (n - k) * model_bytes / d
    return BytePSAssignment(
        gpu_machines=n,
        cpu_machines=cpu_machines,
        cpu_machines_used=k,
        model_bytes=float(model_bytes),
        ss_cpu_bytes=ss_cpu,
        ss_gpu_bytes=ss_gpu,
        gpu_machine_traffic_bytes=model_bytes + (n - 2) * ss_gpu,
        cpu_machine_traffic_bytes=n * ss_cpu,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class BytePSTimes:
    """Communication times (seconds) of BytePS, ring all-reduce and non-colocated PS, and speed-ups."""

    byteps_s: float
    allreduce_s: float
    ps_s: float | None
    speedup_vs_allreduce: float
    speedup_vs_ps: float | None


def byteps_times(assignment: BytePSAssignment, *, bandwidth_bps: float) -> BytePSTimes:
    """``t_opt = 2n(n-1)M / (D B)`` (Eq. 6), ``g_a = D / n^2`` and ``g_p = D / (2k(n-1))`` (Eq. 7).

    All-reduce takes ``2(n-1)M/(nB)`` and non-colocated PS ``max(M/B, nM/(kB))`` (Table 1); PS is
    undefined (``None``) without CPU machines.

    Examples
    --------
    >>> a = byteps_assignment(gpu_machines=32, cpu_machines=16, model_bytes=1e9)
    >>> t = byteps_times(a, bandwidth_bps=100e9)
    >>> round(t.speedup_vs_allreduce, 3), round(t.speedup_vs_ps, 3)
    (1.469, 1.516)

    References
    ----------
    BytePS (Jiang et al., OSDI 2020), §2.2-2.3 (Table 1) and §4.1.1, Eq. (6)-(7).
    """
    if not (math.isfinite(bandwidth_bps) and bandwidth_bps > 0):
        raise InputError(f"bandwidth {bandwidth_bps!r}", where="bandwidth_bps", expected="> 0")
    n, k, m = assignment.gpu_machines, assignment.cpu_machines_used, assignment.model_bytes
    b = bandwidth_bps / BITS_PER_BYTE  # bits/s -> bytes/s
    t_opt = max(assignment.gpu_machine_traffic_bytes, assignment.cpu_machine_traffic_bytes) / b
    t_ar = 2 * (n - 1) * m / (n * b)
    t_ps = max(m / b, n * m / (k * b)) if k > 0 else None
    d = assignment.slots
    return BytePSTimes(
        byteps_s=t_opt,
        allreduce_s=t_ar,
        ps_s=t_ps,
        speedup_vs_allreduce=d / (n * n),
        speedup_vs_ps=d / (2 * k * (n - 1)) if k > 0 else None,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PartShares:
    """Where the partitions of a model land: bytes owned by each CPU and each GPU summation service."""

    parts: int
    cpu_ss_bytes: tuple[float, ...]
    gpu_ss_bytes: tuple[float, ...]


def _ring_owners(slots: int, *, seed: int, replicas: int) -> np.ndarray:
    """Owners of ``slots * replicas`` equally spaced ring points: each slot owns ``1/slots`` of the ring,
    the placement of its points a seeded permutation (deterministic, no global RNG)."""
    rng = np.random.default_rng(seed)
    return rng.permutation(np.repeat(np.arange(slots), replicas))


def _hash64(key: str, seed: int) -> int:
    digest = hashlib.blake2b(key.encode(), digest_size=8, key=seed.to_bytes(8, "little")).digest()
    return int.from_bytes(digest, "little")


def hash_parts(
    tensor_bytes: Sequence[float],
    assignment: BytePSAssignment,
    *,
    part_bytes: float = DEFAULT_PART_BYTES,
    seed: int = 0,
) -> PartShares:
    """Cut tensors into parts of at most ``part_bytes`` and consistently hash them onto the services.

    Each part key ``"tensor/part"`` is hashed (seeded BLAKE2b, 64 bits) onto a ring of ``D * 16``
    equally spaced points owned by the ``D = n^2 + kn - 2k`` slots; slots ``0 .. 2k(n-1)-1`` belong to
    the CPU services (``2(n-1)`` each), the remaining ``n(n-k)`` to the GPU services (``n-k`` each),
    which realises Eq. (1)-(2) in expectation. The same key lands on the same service on every GPU.

    Examples
    --------
    >>> a = byteps_assignment(gpu_machines=2, cpu_machines=1, model_bytes=8e6)
    >>> s = hash_parts([8e6], a)
    >>> s.parts, sum(s.cpu_ss_bytes) + sum(s.gpu_ss_bytes)
    (2, 8000000.0)

    References
    ----------
    BytePS (Jiang et al., OSDI 2020), §4.1 (partitioning into <= 4 MB parts, consistent hashing).
    """
    if not part_bytes > 0:
        raise InputError(f"part size {part_bytes!r}", where="part_bytes", expected="> 0")
    n, k = assignment.gpu_machines, assignment.cpu_machines_used
    slots, replicas = assignment.slots, 16
    owners = _ring_owners(slots, seed=seed, replicas=replicas)
    cpu_slots = 2 * k * (n - 1)
    cpu = np.zeros(k)
    gpu = np.zeros(n)
    parts = 0
    for t, size in enumerate(tensor_bytes):
        count = max(1, math.ceil(size / part_bytes))
        for p in range(count):
            nbytes = size - (count - 1) * part_bytes if p == count - 1 else part_bytes
            slot = int(owners[(_hash64(f"{t}/{p}", seed) * slots * replicas) >> 64])
            if slot < cpu_slots:
                cpu[slot // (2 * (n - 1))] += nbytes
            else:
                gpu[(slot - cpu_slots) // (n - k)] += nbytes
            parts += 1
    return PartShares(parts=parts, cpu_ss_bytes=tuple(cpu.tolist()), gpu_ss_bytes=tuple(gpu.tolist()))
