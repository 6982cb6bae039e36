"""Benchmark: Crux priority compression (Max K-Cut DP, Crux §4.3; crux-spec §4.5-§4.6).

Prints the time of the sequence K-cut DP (one topological order, K = 8) on a random 5,000-job
contention DAG and its ratio to the 2 s target, then the DP with and without the monotone-argmax
restriction on a 1,000-job DAG (same run), with the speed-up ratio and the ratio of inner-loop
candidates scanned.

Run: ``.venv/bin/python benchmarks/bench_compression.py``
"""

from __future__ import annotations

import time

import numpy as np

from commsched.scheduling.compression import bfs_topological_order, crux_compression, max_k_cut_table

TARGET_S = 2.0
LEVELS = 8
MEAN_DEGREE = 10


def random_sharing(n: int, mean_degree: int, rng: np.random.Generator) -> np.ndarray:
    """Symmetric boolean sharing matrix with about ``mean_degree`` neighbours per job."""
    m = n * mean_degree // 2
    a = rng.integers(0, n, m)
    b = rng.integers(0, n, m)
    share = np.zeros((n, n), dtype=bool)
    share[a, b] = True
    share[b, a] = True
    np.fill_diagonal(share, False)
    return share


def best_of(repeats: int, fn: object) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def scanned(split: np.ndarray, n: int, monotone: bool) -> int:
    """Number of candidates j the inner maximisation looks at."""
    total = 0
    for k in range(2, split.shape[0]):
        for i in range(k, n + 1):
            lo = k - 1
            if monotone and i - 1 >= k:
                lo = max(lo, int(split[k, i - 1]))
            total += i - lo
    return total


def main() -> None:
    rng = np.random.default_rng(2024)
    n = 5000
    share = random_sharing(n, MEAN_DEGREE, rng)
    intensity = rng.lognormal(size=n)
    order = bfs_topological_order(share, np.random.default_rng(1))
    t_big = best_of(3, lambda: max_k_cut_table(share, intensity, order, LEVELS))
    print(
        f"DP, n={n}, K={LEVELS}, one order, monotone argmax: {t_big:.3f} s "
        f"(target {TARGET_S} s, ratio {t_big / TARGET_S:.3f})"
    )
    t_crux = best_of(1, lambda: crux_compression(share, intensity, LEVELS, rng=0, orders=10))
    print(f"crux_compression, n={n}, K={LEVELS}, m=10 BFS orders: {t_crux:.3f} s")

    n_small = 1000
    share_s = random_sharing(n_small, MEAN_DEGREE, rng)
    intensity_s = rng.lognormal(size=n_small)
    order_s = bfs_topological_order(share_s, np.random.default_rng(2))
    t_fast = best_of(5, lambda: max_k_cut_table(share_s, intensity_s, order_s, LEVELS))
    t_full = best_of(5, lambda: max_k_cut_table(share_s, intensity_s, order_s, LEVELS, monotone=False))
    table = max_k_cut_table(share_s, intensity_s, order_s, LEVELS, monotone=False)
    work_fast = scanned(table.split, n_small, monotone=True)
    work_full = scanned(table.split, n_small, monotone=False)
    print(
        f"DP, n={n_small}, K={LEVELS}: monotone {t_fast:.4f} s, unrestricted {t_full:.4f} s, "
        f"speed-up {t_full / t_fast:.2f}x; candidates scanned {work_fast} vs {work_full} "
        f"({work_full / work_fast:.2f}x fewer)"
    )


if __name__ == "__main__":
    main()
