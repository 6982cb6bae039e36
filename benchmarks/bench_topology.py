"""Benchmark: build a 2,048-GPU two-layer Clos and index the equal-cost paths of every ToR pair.

Target: build + index under 1 s. Reference measured in the same run: the same enumeration done by a
per-pair breadth-first search over the whole graph (the seed implementation, one NIC pair per ToR pair),
and networkx ``all_shortest_paths`` when networkx is installed.
"""

from __future__ import annotations

import time

from commsched.topology import NodeId, NodeKind, Topology, two_layer_clos
from commsched.topology.paths import SWITCH_KINDS

TARGET_S = 1.0
PARAMS = {"tors": 16, "aggs": 8, "hosts_per_tor": 16, "host_template": "a100_8gpu_4nic"}


def _tor_pair_nics(topo: Topology) -> list[tuple[str, str]]:
    first: dict[NodeId, NodeId] = {}
    for h in topo.hosts:
        first.setdefault(h.tors[0], h.nics[0])
    tors = [t.id for t in topo.nodes_of_kind(NodeKind.TOR)]
    return [(first[a], first[b]) for a in tors for b in tors if a != b]


def _timed_index(topo_params: dict[str, object]) -> tuple[Topology, float, int]:
    t0 = time.perf_counter()
    topo = two_layer_clos(**topo_params)  # type: ignore[arg-type]
    n_paths = topo.index_switch_paths(NodeKind.TOR)
    return topo, time.perf_counter() - t0, n_paths


def main() -> None:
    topo, total, n_paths = _timed_index(PARAMS)
    tors = [t.id for t in topo.nodes_of_kind(NodeKind.TOR)]
    print(f"topology: {topo!r}; {n_paths} equal-cost paths over {len(tors) * (len(tors) - 1)} ToR pairs")
    print(
        f"build+index {topo.n_gpus}-GPU Clos: {total:.2f} s "
        f"(target {TARGET_S:.1f} s, ratio {total / TARGET_S:.2f})"
    )

    fresh = two_layer_clos(**PARAMS)  # type: ignore[arg-type]
    t1 = time.perf_counter()
    ref = sum(len(fresh._shortest_paths(a, b, SWITCH_KINDS)) for a in tors for b in tors if a != b)
    t_ref = time.perf_counter() - t1
    assert ref == n_paths
    t_idx = total - _build_seconds()
    print(
        f"reference per-pair BFS, all ToR pairs: {t_ref:.2f} s; "
        f"indexing alone {t_idx:.3f} s (ratio {t_ref / t_idx:.1f}x)"
    )

    pairs = _tor_pair_nics(topo)
    t2 = time.perf_counter()
    n_nic = sum(len(topo.equal_cost_paths(a, b)) for a, b in pairs)
    t_q = time.perf_counter() - t2
    t3 = time.perf_counter()
    ref_nic = sum(len(fresh._shortest_paths(a, b, SWITCH_KINDS)) for a, b in pairs)  # type: ignore[arg-type,misc]
    t_rq = time.perf_counter() - t3
    assert ref_nic == n_nic
    print(
        f"NIC-pair Path objects ({n_nic} over {len(pairs)} pairs): {t_q:.2f} s; "
        f"per-pair BFS {t_rq:.2f} s (ratio {t_rq / t_q:.1f}x)"
    )
    _networkx_reference(fresh, pairs, t_q)


def _build_seconds() -> float:
    t0 = time.perf_counter()
    two_layer_clos(**PARAMS)  # type: ignore[arg-type]
    return time.perf_counter() - t0


def _networkx_reference(topo: Topology, pairs: list[tuple[str, str]], ours_s: float) -> None:
    try:
        import networkx as nx  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        print("networkx not installed: networkx reference skipped")
        return
    g = nx.DiGraph()
    g.add_edges_from((lk.src, lk.dst) for lk in topo.links)
    t = time.perf_counter()
    n = sum(1 for a, b in pairs for _ in nx.all_shortest_paths(g, a, b))
    t_nx = time.perf_counter() - t
    print(
        f"networkx all_shortest_paths (parallel cables merged): {n} paths in {t_nx:.2f} s "
        f"(ratio {t_nx / ours_s:.1f}x)"
    )


if __name__ == "__main__":
    main()
