"""BytePS (OSDI'20) §4.1-4.2: traffic split, speed-ups, consistent hashing, intra-machine strategies."""

from __future__ import annotations

import numpy as np
import pytest

from commsched.errors import InputError
from commsched.intrajob import byteps_assignment, byteps_times, hash_parts
from commsched.intrajob.byteps_intra import (
    IntraStrategy,
    PcieHost,
    PcieSwitch,
    choose_intra_strategy,
    cpu_assisted_only_time,
    cpu_assisted_time,
    optimal_brute_force_fraction,
    ring_allreduce_intra_time,
)

M = 1e9
B = 100e9


def test_paper_example_n32_k16():
    t = byteps_times(byteps_assignment(gpu_machines=32, cpu_machines=16, model_bytes=M), bandwidth_bps=B)
    assert t.speedup_vs_allreduce == pytest.approx(1.46, abs=0.01)
    assert t.speedup_vs_ps == pytest.approx(1.52, abs=0.01)
    assert t.allreduce_s / t.byteps_s == pytest.approx(t.speedup_vs_allreduce)
    assert t.ps_s / t.byteps_s == pytest.approx(t.speedup_vs_ps)


@pytest.mark.parametrize(("n", "k"), [(2, 1), (8, 3), (32, 16), (5, 5), (7, 0)])
def test_split_conserves_work_and_balances_machines(n, k):
    a = byteps_assignment(gpu_machines=n, cpu_machines=k, model_bytes=M)
    assert k * a.ss_cpu_bytes + n * a.ss_gpu_bytes == pytest.approx(M)  # Eq. 5
    if k > 0:
        assert a.gpu_machine_traffic_bytes == pytest.approx(a.cpu_machine_traffic_bytes)  # t_g = t_c
    t = byteps_times(a, bandwidth_bps=B)
    assert t.byteps_s == pytest.approx(2 * n * (n - 1) * M / (a.slots * B / 8))  # Eq. 6


def test_k_equal_n_growing_tends_to_two():
    gs = [
        byteps_times(
            byteps_assignment(gpu_machines=n, cpu_machines=n, model_bytes=M), bandwidth_bps=B
        ).speedup_vs_allreduce
        for n in (2, 8, 64, 1024)
    ]
    assert gs == sorted(gs)
    assert gs[-1] == pytest.approx(2.0, abs=0.002)


def test_k_zero_is_allreduce():
    n = 6
    a = byteps_assignment(gpu_machines=n, cpu_machines=0, model_bytes=M)
    t = byteps_times(a, bandwidth_bps=B)
    assert a.mode == "allreduce"
    assert a.gpu_machine_traffic_bytes == pytest.approx(2 * (n - 1) * M / n)
    assert a.cpu_machine_traffic_bytes == 0
    assert t.byteps_s == pytest.approx(t.allreduce_s)
    assert t.speedup_vs_ps is None and t.ps_s is None


def test_k_equal_n_is_ps():
    n = 6
    a = byteps_assignment(gpu_machines=n, cpu_machines=n, model_bytes=M)
    t = byteps_times(a, bandwidth_bps=B)
    assert a.mode == "ps"
    assert a.ss_gpu_bytes == 0
    assert a.gpu_machine_traffic_bytes == pytest.approx(M)  # each worker pushes/pulls M
    assert a.cpu_machine_traffic_bytes == pytest.approx(n * M / n)  # each PS handles nM/k
    assert t.byteps_s == pytest.approx(t.ps_s)
    assert t.speedup_vs_ps == pytest.approx(1.0)


def test_more_cpu_machines_than_gpu_machines_do_not_help():
    a = byteps_assignment(gpu_machines=4, cpu_machines=9, model_bytes=M)
    assert a.cpu_machines_used == 4
    assert a == byteps_assignment(gpu_machines=4, cpu_machines=4, model_bytes=M).__class__(
        **{**{f: getattr(a, f) for f in a.__slots__}, "cpu_machines": 9}
    )


def test_invalid_machine_counts():
    with pytest.raises(InputError):
        byteps_assignment(gpu_machines=1, cpu_machines=0, model_bytes=M)
    with pytest.raises(InputError):
        byteps_assignment(gpu_machines=4, cpu_machines=-1, model_bytes=M)


def _share_error(n, k, part_bytes, tensors):
    a = byteps_assignment(gpu_machines=n, cpu_machines=k, model_bytes=float(np.sum(tensors)))
    s = hash_parts(tensors, a, part_bytes=part_bytes, seed=11)
    assert sum(s.cpu_ss_bytes) + sum(s.gpu_ss_bytes) == pytest.approx(a.model_bytes)
    want = np.array([a.ss_cpu_bytes] * k + [a.ss_gpu_bytes] * n)
    got = np.array(s.cpu_ss_bytes + s.gpu_ss_bytes)
    return s.parts, float(np.max(np.abs(got - want)) / a.model_bytes)


def test_consistent_hashing_shares_converge():
    rng = np.random.default_rng(5)
    tensors = rng.uniform(1e5, 2e7, 120)  # ~1.2 GB in 120 tensors
    results = [_share_error(4, 2, pb, tensors) for pb in (4e6, 5e5, 6e4)]
    parts = [r[0] for r in results]
    errs = [r[1] for r in results]
    assert parts == sorted(parts)
    assert errs[-1] < errs[0]
    assert errs[-1] < 0.01


def test_hashing_is_deterministic_and_seeded():
    a = byteps_assignment(gpu_machines=3, cpu_machines=1, model_bytes=5e7)
    one = hash_parts([2e7, 3e7], a, part_bytes=1e6, seed=1)
    assert one == hash_parts([2e7, 3e7], a, part_bytes=1e6, seed=1)
    assert one != hash_parts([2e7, 3e7], a, part_bytes=1e6, seed=2)


# --- intra-machine (§4.2) -------------------------------------------------------------------------

# Reading of the example: M = 1 GiB and b = 105 Gb/s = 13.125e9 B/s reproduce the paper's J* and J(0)
# within 1.5 %; with M = 1e9 B and 13.1e9 B/s the same formula gives 0.122 s and 0.134 s. The ratio
# J(0)/J* = 1.75/1.6 (the paper's "9 % worse") and x* = 1/5 do not depend on the units.
PCIE = PcieHost(
    gpus_per_switch=4, switches=2, gpu_switch_bytes_per_s=105e9 / 8, switch_cpu_bytes_per_s=105e9 / 8
)
GIB = 2.0**30


def test_pcie_example_optimum():
    x = optimal_brute_force_fraction(PCIE)
    assert x == pytest.approx(0.2)
    j_star = cpu_assisted_time(PCIE, model_bytes=GIB, brute_force_fraction=x)
    j_zero = cpu_assisted_time(PCIE, model_bytes=GIB, brute_force_fraction=0.0)
    assert j_star == pytest.approx(0.129, rel=0.02)
    assert j_zero == pytest.approx(0.141, rel=0.02)
    assert j_zero / j_star == pytest.approx(1.75 / 1.6)
    grid = np.linspace(0, 1, 1001)
    assert min(cpu_assisted_time(PCIE, model_bytes=GIB, brute_force_fraction=float(g)) for g in grid) >= (
        j_star - 1e-12
    )


def test_pcie_example_formula_in_paper_units():
    # J(x) = max((3x + 1)/13.1, (7 - 3x)/52.4) with b = 13.1 GB/s and M = 1 GB.
    h = PcieHost(gpus_per_switch=4, switches=2, gpu_switch_bytes_per_s=13.1e9, switch_cpu_bytes_per_s=13.1e9)
    for x in (0.0, 0.1, 0.2, 0.5, 1.0):
        want = max((3 * x + 1) / 13.1, (7 - 3 * x) / 52.4)
        assert cpu_assisted_time(h, model_bytes=1e9, brute_force_fraction=x) == pytest.approx(want)


def test_cpu_assisted_beats_ring_allreduce():
    ca = cpu_assisted_only_time(PCIE, model_bytes=M)
    ar = ring_allreduce_intra_time(PCIE, model_bytes=M, bottleneck_bytes_per_s=80e9 / 8)
    assert ca == pytest.approx(cpu_assisted_time(PCIE, model_bytes=M, brute_force_fraction=0.0))
    assert 1 - ca / ar == pytest.approx(0.237, abs=0.002)


def test_decision_procedure():
    nvlink_host = (
        PcieSwitch(gpus=(0, 1), has_nic=True),
        PcieSwitch(gpus=(2, 3)),
        PcieSwitch(gpus=(4, 5)),
        PcieSwitch(gpus=(6, 7)),
    )
    d = choose_intra_strategy(nvlink_host, nvlink=True)
    assert d.strategy is IntraStrategy.NON_NIC_ROOT and (d.sn, d.sg) == (1, 3)
    assert 0 not in d.roots and 1 not in d.roots and 2 in d.roots
    pcie_host = (
        PcieSwitch(gpus=(0, 1, 2, 3)),
        PcieSwitch(gpus=(4, 5, 6, 7)),
        PcieSwitch(gpus=(), has_nic=True),
    )
    d = choose_intra_strategy(pcie_host, nvlink=False)
    assert d.strategy is IntraStrategy.CPU_ASSISTED and (d.sn, d.sg) == (0, 2)
    assert choose_intra_strategy(pcie_host, nvlink=True).strategy is IntraStrategy.REDUCE_SCATTER
