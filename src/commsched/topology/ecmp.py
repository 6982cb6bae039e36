"""ECMP: map a connection's 5-tuple onto one of the equal-cost paths, and find the source port for a path.

Model
-----
One hash of the packed 5-tuple (``src_ip``, ``dst_ip``, ``src_port``, ``dst_port``, ``protocol`` packed
big-endian as ``>IIHHB``, 13 bytes), with a seed, taken modulo the number of equal-cost paths; the
result indexes the paths of :meth:`Topology.equal_cost_paths` in their canonical order. Real switches
hash at every hop with their own seeds; a single end-to-end hash over the canonical list is the model
the Crux daemon needs (§5.2: the port -> path table "computed from the switches' hash algorithm") and
keeps the inverse query exact: every path a port lands on is reachable, and
:func:`source_port_for_path` returns the smallest RoCEv2 source port (``0xC000..0xFFFF``, the range the
Linux RoCE stack produces) that lands on the wanted path.

References
----------
Crux (SIGCOMM'24) §5.2-5.3 and reference/crux-spec.md §5.2-5.3 (path discovery, source-port
pinning); vClos §2 (ECMP hash collisions).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from commsched.errors import InputError, TopologyError
from commsched.topology.graph import Topology
from commsched.topology.hashes import hash_functions
from commsched.topology.records import NodeId, Path

ROCEV2_PORT = 4791  # IANA UDP port of RoCEv2
UDP = 17
ROCE_SPORT_RANGE = (0xC000, 0xFFFF)
_PACK = struct.Struct(">IIHHB")


@dataclass(frozen=True, slots=True, kw_only=True)
class FiveTuple:
    """A connection's 5-tuple; IPv4 addresses as ints.

    Examples
    --------
    >>> FiveTuple(src_ip=1, dst_ip=2, src_port=0xC000).packed().hex()
    '0000000100000002c00012b711'
    """

    src_ip: int
    dst_ip: int
    src_port: int
    dst_port: int = ROCEV2_PORT
    protocol: int = UDP

    def packed(self) -> bytes:
        """The 13 bytes the hash functions read (``>IIHHB``)."""
        return _PACK.pack(self.src_ip, self.dst_ip, self.src_port, self.dst_port, self.protocol)


def _check_n(n_paths: int) -> None:
    if n_paths < 1:
        raise TopologyError(f"n_paths must be >= 1, got {n_paths}")


def ecmp_path_index(five_tuple: FiveTuple, n_paths: int, hash_name: str = "crc32", seed: int = 0) -> int:
    """The index of the equal-cost path a 5-tuple is hashed onto: ``hash(tuple, seed) % n_paths``.

    Examples
    --------
    >>> ecmp_path_index(FiveTuple(src_ip=1, dst_ip=2, src_port=0xC000), 4, "murmur3")
    1
    """
    _check_n(n_paths)
    return hash_functions().get(hash_name).scalar(five_tuple.packed(), seed) % n_paths


def _rows(base: FiveTuple, ports: NDArray[np.int64]) -> NDArray[np.uint8]:
    rows = np.frombuffer(base.packed(), dtype=np.uint8).repeat(len(ports)).reshape(13, -1).T.copy()
    rows[:, 8] = (ports >> 8) & 0xFF  # src_port high byte (big-endian)
    rows[:, 9] = ports & 0xFF
    return rows


def ecmp_path_indices(
    base: FiveTuple, src_ports: ArrayLike, n_paths: int, hash_name: str = "crc32", seed: int = 0
) -> NDArray[np.int64]:
    """Vectorised :func:`ecmp_path_index` over many source ports (``base.src_port`` is ignored).

    Examples
    --------
    >>> base = FiveTuple(src_ip=1, dst_ip=2, src_port=0)
    >>> ecmp_path_indices(base, [0xC000, 0xC001], 4, "murmur3").tolist()
    [1, 2]
    """
    _check_n(n_paths)
    ports = np.asarray(src_ports, dtype=np.int64)
    if ports.ndim != 1 or (ports.size and (ports.min() < 0 or ports.max() > 0xFFFF)):
        raise InputError("source ports must be a 1-D array of values in 0..65535", where="src_ports")
    hashes = hash_functions().get(hash_name).vector(_rows(base, ports), seed)
    return (hashes % np.uint32(n_paths)).astype(np.int64)


def source_port_for_path(
    src_ip: int,
    dst_ip: int,
    wanted_index: int,
    n_paths: int,
    hash_name: str = "crc32",
    *,
    port_range: tuple[int, int] = ROCE_SPORT_RANGE,
    seed: int = 0,
) -> int:
    """The smallest source port in ``port_range`` (inclusive) whose 5-tuple hashes onto path ``wanted_index``.

    Raises
    ------
    TopologyError
        If no port of the range lands on the wanted path (or the index is out of range).

    Examples
    --------
    >>> p = source_port_for_path(1, 2, 3, 4, "xor")
    >>> ecmp_path_index(FiveTuple(src_ip=1, dst_ip=2, src_port=p), 4, "xor")
    3
    """
    if not 0 <= wanted_index < n_paths:
        raise TopologyError(f"path index {wanted_index} out of range for {n_paths} paths")
    lo, hi = port_range
    ports = np.arange(lo, hi + 1, dtype=np.int64)
    idx = ecmp_path_indices(
        FiveTuple(src_ip=src_ip, dst_ip=dst_ip, src_port=0), ports, n_paths, hash_name, seed
    )
    hits = np.flatnonzero(idx == wanted_index)
    if hits.size == 0:
        raise TopologyError(
            f"no source port in {lo}..{hi} maps {src_ip}->{dst_ip} onto path {wanted_index} ({hash_name})"
        )
    return int(ports[hits[0]])


def _ips(topology: Topology, src_nic: NodeId | str, dst_nic: NodeId | str) -> tuple[int, int]:
    a, b = topology.node(src_nic).ip, topology.node(dst_nic).ip
    if a is None or b is None:
        raise TopologyError(f"{src_nic!r} or {dst_nic!r} has no IP address (not a NIC or endpoint)")
    return a, b


def port_for_path(
    topology: Topology,
    src_nic: NodeId | str,
    dst_nic: NodeId | str,
    path_index: int,
    hash_name: str = "crc32",
    *,
    seed: int = 0,
) -> int:
    """The RoCEv2 source port that pins connection ``src_nic -> dst_nic`` onto equal-cost path ``path_index``.

    Examples
    --------
    >>> from commsched.topology.builders import crux_testbed
    >>> topo = crux_testbed()
    >>> port = port_for_path(topo, "h0/nic0", "h4/nic0", 5, "murmur3")
    >>> path_for_port(topo, "h0/nic0", "h4/nic0", port, "murmur3").nodes[2]
    'agg5'
    """
    n = len(topology.equal_cost_paths(src_nic, dst_nic))
    a, b = _ips(topology, src_nic, dst_nic)
    return source_port_for_path(a, b, path_index, n, hash_name, seed=seed)


def path_for_port(
    topology: Topology,
    src_nic: NodeId | str,
    dst_nic: NodeId | str,
    src_port: int,
    hash_name: str = "crc32",
    *,
    seed: int = 0,
) -> Path:
    """The equal-cost path ECMP sends the connection ``src_nic:src_port -> dst_nic`` along."""
    paths = topology.equal_cost_paths(src_nic, dst_nic)
    a, b = _ips(topology, src_nic, dst_nic)
    return paths[
        ecmp_path_index(FiveTuple(src_ip=a, dst_ip=b, src_port=src_port), len(paths), hash_name, seed)
    ]
