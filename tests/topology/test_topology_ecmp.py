"""ECMP hashing: test vectors, vectorised == scalar, and the source-port inverse on every candidate path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.errors import TopologyError, UnknownNameError
from commsched.topology import (
    FiveTuple,
    ecmp_path_index,
    ecmp_path_indices,
    hash_functions,
    path_for_port,
    port_for_path,
    source_port_for_path,
    two_layer_clos,
)
from commsched.topology.hashes import crc32, murmur3_32, xor_fold

HASHES = hash_functions().names()

# Published MurmurHash3 x86_32 vectors (reference MurmurHash3.cpp / SMHasher verification set).
MURMUR3_VECTORS = [
    (b"", 0, 0),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\0\0\0\0", 0, 0x2362F9DE),
    (b"hello", 0, 0x248BFA47),
    (b"abc", 0, 0xB3DD93FA),
    (b"a", 0x9747B28C, 0x7FA09EA6),
    (b"aa", 0x9747B28C, 0x5D211726),
    (b"aaa", 0x9747B28C, 0x283E0130),
    (b"aaaa", 0x9747B28C, 0x5A97808A),
    (b"Hello, world!", 0x9747B28C, 0x24884CBA),
    (b"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD),
]


@pytest.mark.parametrize(("data", "seed", "want"), MURMUR3_VECTORS)
def test_murmur3_vectors(data: bytes, seed: int, want: int) -> None:
    assert murmur3_32(data, seed) == want


def test_crc32_and_xor_vectors() -> None:
    assert crc32(b"123456789") == 0xCBF43926
    assert xor_fold(b"") == 0
    assert xor_fold(b"\x00\x01\x00\x00") == 1  # 0x00010000 folds to 0x0001


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.binary(min_size=7, max_size=7), min_size=1, max_size=8), seed=st.integers(0, 2**32 - 1)
)
def test_vector_forms_equal_scalar_forms(rows: list[bytes], seed: int) -> None:
    mat = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(rows), 7)
    for name in HASHES:
        h = hash_functions().get(name)
        assert h.vector(mat, seed).tolist() == [h.scalar(r, seed) for r in rows]


@settings(max_examples=40, deadline=None)
@given(
    src=st.integers(0, 2**32 - 1),
    dst=st.integers(0, 2**32 - 1),
    n=st.integers(1, 64),
    seed=st.integers(0, 99),
    ports=st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=20),
)
def test_vectorised_index_equals_scalar(src: int, dst: int, n: int, seed: int, ports: list[int]) -> None:
    base = FiveTuple(src_ip=src, dst_ip=dst, src_port=0)
    for name in HASHES:
        vec = ecmp_path_indices(base, ports, n, name, seed).tolist()
        ref = [ecmp_path_index(FiveTuple(src_ip=src, dst_ip=dst, src_port=p), n, name, seed) for p in ports]
        assert vec == ref


@pytest.fixture(scope="module")
def clos() -> object:
    return two_layer_clos(tors=4, aggs=2, hosts_per_tor=2, uplinks_per_tor=4)


@pytest.mark.parametrize("hash_name", HASHES)
def test_inverse_hash_reaches_every_candidate_path(clos: object, hash_name: str) -> None:
    from commsched.topology import Topology

    assert isinstance(clos, Topology)
    src, dst = "h0/nic0", "h5/nic2"  # hosts under different ToRs
    paths = clos.equal_cost_paths(src, dst)
    assert len(paths) == 2 * 2 * 2
    for k, path in enumerate(paths):
        for seed in (0, 17):
            port = port_for_path(clos, src, dst, k, hash_name, seed=seed)
            assert 0xC000 <= port <= 0xFFFF
            assert path_for_port(clos, src, dst, port, hash_name, seed=seed) == path
            smaller = np.arange(0xC000, port)
            base = FiveTuple(src_ip=clos.node(src).ip or 0, dst_ip=clos.node(dst).ip or 0, src_port=0)
            assert k not in ecmp_path_indices(base, smaller, len(paths), hash_name, seed).tolist()  # smallest


@settings(max_examples=30, deadline=None)
@given(src=st.integers(0, 2**32 - 1), dst=st.integers(0, 2**32 - 1), n=st.integers(1, 16), data=st.data())
def test_inverse_property(src: int, dst: int, n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(0, n - 1))
    name = data.draw(st.sampled_from(HASHES))
    port = source_port_for_path(src, dst, k, n, name)
    assert ecmp_path_index(FiveTuple(src_ip=src, dst_ip=dst, src_port=port), n, name) == k


def test_inverse_errors() -> None:
    first = ecmp_path_index(FiveTuple(src_ip=1, dst_ip=2, src_port=0xC000), 2, "crc32")
    with pytest.raises(TopologyError, match="no source port"):
        source_port_for_path(1, 2, 1 - first, 2, "crc32", port_range=(0xC000, 0xC000))
    with pytest.raises(TopologyError, match="out of range"):
        source_port_for_path(1, 2, 5, 4)
    with pytest.raises(UnknownNameError, match="expected one of crc32, murmur3, xor"):
        ecmp_path_index(FiveTuple(src_ip=1, dst_ip=2, src_port=1), 2, "md5")


def test_five_tuple_packing() -> None:
    ft = FiveTuple(src_ip=0x0A000001, dst_ip=0x0A000102, src_port=0xC001)
    assert ft.packed() == bytes.fromhex("0a0000010a000102c00112b711")
