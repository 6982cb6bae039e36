"""Route choices for the connections of running jobs: ECMP hashing and explicit routes.

ECMP: each connection gets a source port drawn at random (seeded per connection, so the draw does not
depend on which other jobs run) and the configured hash maps its 5-tuple onto one of the equal-cost
paths between the two NICs, as a switch would.
"""

from __future__ import annotations

import zlib
from functools import partial

import numpy as np

from commsched.scheduling.memo import Memo, maybe
from commsched.scheduling.routemap import JobRoutes, RouteMap
from commsched.scheduling.state import ClusterState, ConnectionKey, PlacedJob
from commsched.scheduling.traffic import job_connections
from commsched.topology import NodeKind, Topology
from commsched.topology.ecmp import FiveTuple, ecmp_path_index

#: RoCEv2 source ports come from 0xC000-0xFFFF (Linux derives them from the GRH flow label)
SPORT_LO, SPORT_HI = 0xC000, 0xFFFF


def connection_seed(seed: int, key: ConnectionKey) -> int:
    """A per-connection seed that depends only on the run seed and the connection itself."""
    return (seed * 1_000_003 + zlib.crc32(f"{key.job}|{key.src}|{key.dst}".encode())) & 0xFFFFFFFF


def network_pair(topology: Topology, key: ConnectionKey) -> tuple[str, str] | None:
    """The NICs a connection crosses the network between, or ``None`` for intra-host/abstract ones."""
    if not topology.hosts:
        return None
    na, nb = topology.node(key.src), topology.node(key.dst)
    if na.host == nb.host:
        return None
    nic_a = topology.nic_of(key.src) if na.kind is NodeKind.GPU else key.src
    nic_b = topology.nic_of(key.dst) if nb.kind is NodeKind.GPU else key.dst
    return nic_a, nic_b


def ecmp_routes(
    state: ClusterState, *, seed: int, hash_name: str = "murmur3", memo: Memo | None = None
) -> JobRoutes:
    """ECMP path index of every inter-host connection of every running job (random source ports).

    A job's routes depend only on the job, the seed and the hash; with a ``memo`` they are hashed once
    per job, not at every decision (and the job keeps the same :class:`RouteMap`).
    """
    return JobRoutes(
        {
            job.id: maybe(
                memo,
                ("ecmp", job.id, seed, hash_name),
                partial(_job_route_map, state.topology, job, seed, hash_name),
            )
            for job in state.jobs
        }
    )


def _job_route_map(topo: Topology, job: PlacedJob, seed: int, hash_name: str) -> RouteMap:
    return RouteMap(job_ecmp_routes(topo, job, seed, hash_name))


def job_ecmp_routes(topo: Topology, job: PlacedJob, seed: int, hash_name: str) -> dict[ConnectionKey, int]:
    """ECMP path index of every inter-host connection of one job (see :func:`ecmp_routes`)."""
    out: dict[ConnectionKey, int] = {}
    for key in job_connections(topo, job):
        pair = network_pair(topo, key)
        if pair is None:
            continue
        paths = topo.equal_cost_paths(*pair)
        if len(paths) == 1:
            continue
        rng = np.random.default_rng(connection_seed(seed, key))
        sport = int(rng.integers(SPORT_LO, SPORT_HI + 1))
        ft = FiveTuple(
            src_ip=topo.node(pair[0]).ip or 0,
            dst_ip=topo.node(pair[1]).ip or 0,
            src_port=sport,
        )
        out[key] = ecmp_path_index(ft, len(paths), hash_name)
    return out
