"""BytePS intra-machine communication (OSDI'20 §4.2): CPU-assisted aggregation on PCIe-only hosts, the
non-NIC reduce root on NVLink hosts, and the ``(Sn, Sg)`` decision procedure.

Bandwidths here are in **bytes** per second (the paper's example uses GB/s); model sizes in bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from commsched.errors import InputError


@dataclass(frozen=True, slots=True, kw_only=True)
class PcieHost:
    """A PCIe-only GPU machine as seen by §4.2.1 (Fig. 7).

    Attributes
    ----------
    gpus_per_switch
        ``n``: GPUs under one PCIe switch (the paper's example: 4).
    switches
        ``p``: PCIe switches (GPU groups) per machine (the example: 2).
    gpu_switch_bytes_per_s
        ``b(N_i, S_j)``: GPU <-> PCIe switch bandwidth.
    switch_cpu_bytes_per_s
        ``b(S_j, C_j)``: PCIe switch <-> CPU bandwidth.
    """

    gpus_per_switch: int
    switches: int
    gpu_switch_bytes_per_s: float
    switch_cpu_bytes_per_s: float

    def __post_init__(self) -> None:
        if self.gpus_per_switch < 1 or self.switches < 1:
            raise InputError(
                f"{self.gpus_per_switch} GPUs x {self.switches} switches",
                where="PcieHost",
                expected="at least one GPU and one switch",
            )
        if not (self.gpu_switch_bytes_per_s > 0 and self.switch_cpu_bytes_per_s > 0):
            raise InputError("non-positive bandwidth", where="PcieHost", expected="bandwidths > 0")


def cpu_assisted_time(host: PcieHost, *, model_bytes: float, brute_force_fraction: float) -> float:
    """``J(x)`` of §4.2.1: a fraction ``x`` by brute-force copy, ``y = 1 - x`` CPU-assisted.

    ``t(S_j, C_j) = (n x + y) M`` (Eq. 8), ``t(N_i, S_j) = ((2n - 1)/n y + x) M`` (Eq. 9) and
    ``J = max(t(N_i, S_j) / b(N_i, S_j), t(S_j, C_j) / b(S_j, C_j))``.

    Examples
    --------
    The paper's production machine: ``n = 4``, both links 13.1 GB/s, ``M = 1 GB``:
    ``J(x) = max((3x + 1)/13.1, (7 - 3x)/52.4)``.

    >>> h = PcieHost(gpus_per_switch=4, switches=2, gpu_switch_bytes_per_s=13.1e9,
    ...              switch_cpu_bytes_per_s=13.1e9)
    >>> round(cpu_assisted_time(h, model_bytes=1e9, brute_force_fraction=0.0), 4)   # 7/52.4
    0.1336

    References
    ----------
    BytePS (Jiang et al., OSDI 2020), §4.2.1, Eq. (8)-(9) and Fig. 7.
    """
    x = brute_force_fraction
    if not 0 <= x <= 1:
        raise InputError(f"fraction {x!r}", where="brute_force_fraction", expected="a value in [0, 1]")
    n, y, m = host.gpus_per_switch, 1.0 - x, model_bytes
    t_sc = (n * x + y) * m
    t_ns = ((2 * n - 1) / n * y + x) * m
    return max(t_ns / host.gpu_switch_bytes_per_s, t_sc / host.switch_cpu_bytes_per_s)


def optimal_brute_force_fraction(host: PcieHost) -> float:
    """``x* = argmin_x J(x)``: where the two (linear) terms of ``J`` cross, clipped to ``[0, 1]``.

    With ``a = b(N_i, S_j)`` and ``c = b(S_j, C_j)``: the GPU-link term ``((2n-1)/n - (n-1)/n x) M / a``
    falls and the CPU-link term ``(1 + (n-1) x) M / c`` rises, so
    ``x* = ((2n-1)/n / a - 1 / c) / ((n-1)/n / a + (n-1) / c)``.

    Examples
    --------
    >>> h = PcieHost(gpus_per_switch=4, switches=2, gpu_switch_bytes_per_s=13.1e9,
    ...              switch_cpu_bytes_per_s=13.1e9)
    >>> round(optimal_brute_force_fraction(h), 6)
    0.2

    References
    ----------
    BytePS (Jiang et al., OSDI 2020), §4.2.1 ("optimum at x* = 1/5").
    """
    n = host.gpus_per_switch
    if n == 1:
        return 0.0  # nothing to reduce inside a switch; J does not depend on x
    a, c = host.gpu_switch_bytes_per_s, host.switch_cpu_bytes_per_s
    x = ((2 * n - 1) / n / a - 1 / c) / ((n - 1) / n / a + (n - 1) / c)
    return min(1.0, max(0.0, x))


def ring_allreduce_intra_time(host: PcieHost, *, model_bytes: float, bottleneck_bytes_per_s: float) -> float:
    """``J_ar = 2(np - 1) M / (np b_bottleneck)``: ring all-reduce over all ``np`` GPUs of the host.

    Examples
    --------
    >>> h = PcieHost(gpus_per_switch=4, switches=2, gpu_switch_bytes_per_s=105e9 / 8,
    ...              switch_cpu_bytes_per_s=105e9 / 8)
    >>> round(ring_allreduce_intra_time(h, model_bytes=1e9, bottleneck_bytes_per_s=80e9 / 8), 5)
    0.175

    References
    ----------
    BytePS (Jiang et al., OSDI 2020), §4.2.1 ("CPU-assisted aggregation beats ring all-reduce").
    """
    g = host.gpus_per_switch * host.switches
    return 2 * (g - 1) * model_bytes / (g * bottleneck_bytes_per_s)


def cpu_assisted_only_time(host: PcieHost, *, model_bytes: float) -> float:
    """``J_ca = M / b(S_j, C_j) * max(1, (2n - 1) / (kappa n))``, ``kappa = b(N_i, S_j) / b(S_j, C_j)``.

    This is ``J(0)``: pure CPU-assisted aggregation.

    Examples
    --------
    With the production values J_ca is 23.8 % below J_ar (the paper: 23.7 %).

    >>> h = PcieHost(gpus_per_switch=4, switches=2, gpu_switch_bytes_per_s=105e9 / 8,
    ...              switch_cpu_bytes_per_s=105e9 / 8)
    >>> ca = cpu_assisted_only_time(h, model_bytes=1e9)
    >>> ar = ring_allreduce_intra_time(h, model_bytes=1e9, bottleneck_bytes_per_s=80e9 / 8)
    >>> round(1 - ca / ar, 3)
    0.238

    References
    ----------
    BytePS (Jiang et al., OSDI 2020), §4.2.1.
    """
    n = host.gpus_per_switch
    kappa = host.gpu_switch_bytes_per_s / host.switch_cpu_bytes_per_s
    return model_bytes / host.switch_cpu_bytes_per_s * max(1.0, (2 * n - 1) / (kappa * n))


@dataclass(frozen=True, slots=True, kw_only=True)
class PcieSwitch:
    """One PCIe switch of a host: the GPUs under it and whether the NIC hangs off it."""

    gpus: tuple[int, ...]
    has_nic: bool = False


class IntraStrategy(StrEnum):
    """BytePS's intra-machine strategies (§4.2.3)."""

    NON_NIC_ROOT = "reduce-broadcast-non-nic-root"
    REDUCE_SCATTER = "reduce-scatter-all-gather"
    CPU_ASSISTED = "cpu-assisted-aggregation"


@dataclass(frozen=True, slots=True, kw_only=True)
class IntraDecision:
    """The strategy for a host and, for the reduce/broadcast strategy, its root GPUs."""

    strategy: IntraStrategy
    sn: int
    sg: int
    roots: tuple[int, ...] = ()


def choose_intra_strategy(switches: tuple[PcieSwitch, ...], *, nvlink: bool) -> IntraDecision:
    """The ``(Sn, Sg)`` procedure of §4.2.3, with the non-NIC root rule of §4.2.2.

    ``Sn`` counts switches with GPUs and the NIC, ``Sg`` switches with GPUs only. If both are positive
    (asymmetric, NVLink-like) reduce/broadcast with roots under GPU-only switches; otherwise
    reduce-scatter/all-gather, CPU-assisted when there is no NVLink. Roots are the GPUs under GPU-only
    switches (any of them is optimal; Fig. 14b: root = 2 and root = {2, 3} tie).

    Examples
    --------
    The NVLink host of Fig. 8a: NIC on the switch of GPUs 0-1.

    >>> sw = (PcieSwitch(gpus=(0, 1), has_nic=True), PcieSwitch(gpus=(2, 3)),
    ...       PcieSwitch(gpus=(4, 5)), PcieSwitch(gpus=(6, 7)))
    >>> d = choose_intra_strategy(sw, nvlink=True)
    >>> d.strategy.value, d.roots[:2]
    ('reduce-broadcast-non-nic-root', (2, 3))
    >>> choose_intra_strategy((PcieSwitch(gpus=(0, 1, 2, 3)), PcieSwitch(gpus=(4, 5, 6, 7))),
    ...                       nvlink=False).strategy.value
    'cpu-assisted-aggregation'

    References
    ----------
    BytePS (Jiang et al., OSDI 2020), §4.2.2-4.2.3.
    """
    with_gpus = [s for s in switches if s.gpus]
    sn = sum(1 for s in with_gpus if s.has_nic)
    sg = len(with_gpus) - sn
    if sn > 0 and sg > 0:
        roots = tuple(g for s in with_gpus if not s.has_nic for g in s.gpus)
        return IntraDecision(strategy=IntraStrategy.NON_NIC_ROOT, sn=sn, sg=sg, roots=roots)
    strategy = IntraStrategy.REDUCE_SCATTER if nvlink else IntraStrategy.CPU_ASSISTED
    return IntraDecision(strategy=strategy, sn=sn, sg=sg)
