"""How often 5-tuple ECMP makes ring all-reduce flows share a link, by cluster size (vClos §3.1, Fig. 2).

Model
-----
A cluster of ``size`` GPUs is the vClos leaf-spine: leaves of 4 servers x 8 GPUs (one 100 Gb/s NIC
per GPU), 32 spines, one uplink from every leaf to every spine. A task is one ring all-reduce over
``ranks`` GPUs drawn at random (default: every GPU of the cluster, in random order); rank ``i`` sends
to rank ``i + 1``. Each flow between different leaves gets a random RoCEv2 source port and is hashed
with MurmurHash3 over its 5-tuple onto one of the equal-cost paths (one per spine), as switches do.
The *contention degree* of a flow is the largest number of the task's flows on any leaf-spine link it
takes (1 = alone). The result is the distribution of contention degrees over all cross-leaf flows
of all tasks (fractions sum to 1), per cluster size.

References
----------
vClos §3.1 ("Mmh3 is chosen as the hash function and the 5-tuple ... as the hash factor"; Fig. 2:
"the larger the cluster size, the greater the likelihood of network contention").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from commsched.errors import InputError
from commsched.scheduling.routing import SPORT_HI, SPORT_LO
from commsched.topology import LinkId, LinkKind, NodeId, Topology
from commsched.topology.builders import leaf_spine
from commsched.topology.ecmp import FiveTuple, ecmp_path_index

GPUS_PER_LEAF = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class CollisionStats:
    """Contention degrees of one cluster size: ``counts[d]`` flows had degree ``d``."""

    size: int
    tasks: int
    flows: int
    counts: dict[int, int]

    def fractions(self) -> dict[int, float]:
        """Degree -> fraction of flows (sums to 1)."""
        return {d: c / self.flows for d, c in sorted(self.counts.items())} if self.flows else {}

    @property
    def contended(self) -> float:
        """Fraction of flows that share a link with at least one other flow."""
        return sum(f for d, f in self.fractions().items() if d > 1)


def cluster(size: int) -> Topology:
    """The vClos leaf-spine with ``size`` GPUs (a multiple of 32).

    Raises
    ------
    InputError
        When ``size`` is not a positive multiple of 32.
    """
    if size < GPUS_PER_LEAF or size % GPUS_PER_LEAF:
        raise InputError(f"cluster size {size}", where="--sizes", expected="a multiple of 32 GPUs (>= 32)")
    return leaf_spine(leaves=size // GPUS_PER_LEAF, spines=32, gpus_per_host=8, hosts_per_leaf=4)


def _leaf_of(topo: Topology) -> dict[NodeId, NodeId]:
    return {g: h.tors[0] for h in topo.hosts for g in h.gpus}


def ring_flows(topo: Topology, order: Sequence[NodeId]) -> list[tuple[NodeId, NodeId]]:
    """The cross-leaf flows (src GPU, dst GPU) of a ring over ``order``."""
    leaf = _leaf_of(topo)
    n = len(order)
    pairs = [(order[i], order[(i + 1) % n]) for i in range(n)] if n > 1 else []
    return [(a, b) for a, b in pairs if leaf[a] != leaf[b]]


def flow_links(topo: Topology, src: NodeId, dst: NodeId, sport: int) -> tuple[LinkId, ...]:
    """The fabric links ECMP (MurmurHash3 over the 5-tuple) sends a flow along."""
    nic_a, nic_b = topo.nic_of(src), topo.nic_of(dst)
    paths = topo.equal_cost_paths(nic_a, nic_b)
    ft = FiveTuple(src_ip=topo.node(nic_a).ip or 0, dst_ip=topo.node(nic_b).ip or 0, src_port=sport)
    path = paths[ecmp_path_index(ft, len(paths), "murmur3")]
    return tuple(lk for lk in path.links if topo.links[lk].kind == LinkKind.FABRIC)


def contention_degrees(flow_paths: Sequence[Sequence[LinkId]]) -> list[int]:
    """Per flow: the most flows on any of its links (flows on no link: degree 1)."""
    use = Counter(lk for p in flow_paths for lk in p)
    return [max((use[lk] for lk in p), default=1) for p in flow_paths]


def collisions(size: int, *, tasks: int = 100, ranks: int | None = None, seed: int = 0) -> CollisionStats:
    """Contention degrees of ``tasks`` random ring all-reduce tasks on a cluster of ``size`` GPUs.

    Examples
    --------
    >>> s = collisions(64, tasks=5, seed=1)
    >>> round(sum(s.fractions().values()), 6), s.size
    (1.0, 64)
    """
    if tasks < 1:
        raise InputError(f"{tasks} tasks", where="--tasks", expected=">= 1")
    topo = cluster(size)
    gpus = list(topo.gpus)
    k = len(gpus) if ranks is None else ranks
    if not 2 <= k <= len(gpus):
        raise InputError(f"{k} ranks", where="ranks", expected=f"2..{len(gpus)}")
    rng = np.random.default_rng(seed)
    counts: Counter[int] = Counter()
    flows = 0
    for _ in range(tasks):
        order = [gpus[i] for i in rng.permutation(len(gpus))[:k]]
        fl = ring_flows(topo, order)
        ports = rng.integers(SPORT_LO, SPORT_HI + 1, size=len(fl))
        paths = [flow_links(topo, a, b, int(p)) for (a, b), p in zip(fl, ports, strict=True)]
        counts.update(contention_degrees(paths))
        flows += len(fl)
    return CollisionStats(size=size, tasks=tasks, flows=flows, counts=dict(sorted(counts.items())))


def collision_table(sizes: Sequence[int], *, tasks: int = 100, seed: int = 0) -> tuple[CollisionStats, ...]:
    """:func:`collisions` for every size (same seed per size, so sizes are comparable run to run)."""
    return tuple(collisions(s, tasks=tasks, seed=seed) for s in sizes)


def collisions_json(stats: Sequence[CollisionStats]) -> dict[str, object]:
    """``{"sizes": {SIZE: {"flows", "contended", "fractions": {DEGREE: f}}}}``."""
    return {
        "hash": "murmur3",
        "sizes": {
            str(s.size): {
                "tasks": s.tasks,
                "flows": s.flows,
                "contended": round(s.contended, 6),
                "fractions": {str(d): round(f, 6) for d, f in s.fractions().items()},
            }
            for s in stats
        },
    }


def plot_collisions(stats: Sequence[CollisionStats], path: str) -> None:
    """Stacked bars like Fig. 2 (matplotlib imported lazily)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    degrees = sorted({d for s in stats for d in s.counts})
    fig, ax = plt.subplots(figsize=(7, 4))
    bottom = np.zeros(len(stats))
    for d in degrees:
        vals = np.array([s.fractions().get(d, 0.0) * 100 for s in stats])
        ax.bar([str(s.size) for s in stats], vals, bottom=bottom, label=f"{d} flow{'s' if d > 1 else ''}")
        bottom += vals
    ax.set(
        xlabel="cluster GPUs", ylabel="% of flows", title="ECMP (MurmurHash3 5-tuple): flows sharing a link"
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
