"""Chakra execution traces (MLCommons, the format ASTRA-sim reads), decoded from the protobuf wire format.

A Chakra ET file is a stream of length-delimited protobuf messages (a varint length, then the message):
one ``GlobalMetadata``, then one ``Node`` per operation. The messages are read here with a small
wire-format decoder instead of generated classes, so no protobuf runtime is needed. What is read of them
(field numbers as the public schema ``schema/protobuf/et_def.proto`` of the Chakra repository gives them):

* ``Node``: ``id`` (1, varint), ``name`` (2, string), ``type`` (3, enum: 4 compute, 7 collective
  communication), ``duration_micros`` (7, varint), ``inputs`` (8, an ``IOInfo``), ``attr`` (10, repeated
  ``AttributeProto``); other fields are skipped.
* ``IOInfo``: ``shapes`` (2) and ``types`` (3), each a string holding a list (``[[53120]]``,
  ``['Tensor(float)']``).
* ``AttributeProto``: ``name`` (1) and one value; read are integer values (varint fields: ``int32``,
  ``int64``, ``uint32``, ``uint64``, ``bool``; zigzag ``sint32``/``sint64``) and strings (29). The
  attributes used: ``comm_size`` (bytes of a collective), ``comm_type``, ``pg_name`` and ``is_cpu_op``.

A collective's bytes are its ``comm_size`` where the trace has it, else its input tensors (shapes x
element size). The compute time is the sum of the durations of the compute nodes that ran on a GPU
(``is_cpu_op`` false), where the trace records them.

References
----------
.. [1] S. Sridharan et al., "Chakra: Advancing performance benchmarking and co-design using standardized
   execution traces", arXiv:2305.14516, 2023.
"""

from __future__ import annotations

import ast
import io
import json
import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from commsched.errors import InputError
from commsched.workload.profiling.records import Collective, ExecutionTrace
from commsched.workload.profiling.tracefile import TraceStream
from commsched.workload.profiling.types import element_size

COMP_NODE = 4
COMM_COLL_NODE = 7
_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_INT_VALUES = {7, 9, 11, 13, 27}  # int32, int64, uint32, uint64, bool
_ZIGZAG_VALUES = {15, 17}  # sint32, sint64
_STRING_VALUE = 29
#: the largest message read (a Chakra node is a few hundred bytes; the bound keeps a hostile length
#: from allocating the whole --max-bytes at once)
MAX_MESSAGE_BYTES = 64 * 10**6
#: the most collective nodes kept (each becomes a record of the result)
MAX_COLLECTIVES = 1_000_000
#: the enum of collective kinds, as the schema numbers it
COMM_TYPES = (
    "ALL_REDUCE", "REDUCE", "ALL_GATHER", "GATHER", "SCATTER", "BROADCAST", "ALL_TO_ALL", "REDUCE_SCATTER",
    "REDUCE_SCATTER_BLOCK", "BARRIER",
)  # fmt: skip


class _TruncatedError(Exception):
    """The buffer ended inside a field."""


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if i >= len(buf) or shift > 63:
            raise _TruncatedError
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of every field of one message: ints, or bytes for the rest."""
    out: list[tuple[int, int, Any]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == _VARINT:
            value, i = _varint(buf, i)
        elif wire in (_FIXED64, _FIXED32):
            width = 8 if wire == _FIXED64 else 4
            if i + width > len(buf):
                raise _TruncatedError
            value, i = buf[i : i + width], i + width
        elif wire == _LEN:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise _TruncatedError
            value, i = buf[i : i + n], i + n
        else:
            raise ValueError(f"wire type {wire}")
        if number == 0:
            raise ValueError("field number 0")
        out.append((number, wire, value))
    return out


def _attribute(buf: bytes) -> tuple[str, Any]:
    name, value = "", None
    for number, wire, v in _fields(buf):
        if number == 1 and wire == _LEN:
            name = v.decode("utf-8", "replace")
        elif number in _INT_VALUES and wire == _VARINT:
            value = v
        elif number in _ZIGZAG_VALUES and wire == _VARINT:
            value = (v >> 1) ^ -(v & 1)
        elif number == _STRING_VALUE and wire == _LEN:
            value = v.decode("utf-8", "replace")
        elif number in (3, 21, 25) and wire == _FIXED64:  # double, fixed64, sfixed64
            value = struct.unpack("<d" if number == 3 else "<q", v)[0]
    return name, value


@dataclass(slots=True)
class _Node:
    """The fields of one ``Node`` this reader uses (filled while decoding)."""

    name: str = ""
    type: int = 0
    duration_us: int = 0
    shapes: str = ""
    types: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)


def _node(buf: bytes) -> _Node:
    n = _Node()
    for number, wire, v in _fields(buf):
        if number == 2 and wire == _LEN:
            n.name = v.decode("utf-8", "replace")
        elif number == 3 and wire == _VARINT:
            n.type = v
        elif number == 7 and wire == _VARINT:
            n.duration_us = v
        elif number == 8 and wire == _LEN:
            io = {k: val for k, w, val in _fields(v) if w == _LEN}
            n.shapes = io.get(2, b"").decode("utf-8", "replace")
            n.types = io.get(3, b"").decode("utf-8", "replace")
        elif number == 10 and wire == _LEN:
            key, value = _attribute(v)
            n.attrs[key] = value
    return n


def _stream_varint(stream: TraceStream) -> int | None:
    """A message length from the stream, ``None`` at a clean end of the data."""
    value, shift = 0, 0
    while True:
        b = stream.read(1)
        if not b:
            if shift == 0:
                return None
            raise _TruncatedError
        value |= (b[0] & 0x7F) << shift
        shift += 7
        if b[0] < 0x80:
            return value
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _messages(stream: TraceStream, where: str) -> Iterator[bytes]:
    """The length-delimited messages of the stream, one at a time (memory: one message)."""
    k = 0
    while True:
        at = stream.offset
        try:
            n = _stream_varint(stream)
        except (_TruncatedError, ValueError):
            raise InputError(
                "truncated or malformed message length", where=f"{where}: byte {at}", expected="a Chakra ET"
            ) from None
        if n is None:
            return
        if n == 0 or n > MAX_MESSAGE_BYTES:
            what = "an empty message" if n == 0 else f"a message of {n:,} bytes announced"
            raise InputError(
                f"message {k} is {what}",
                where=f"{where}: byte {at}",
                expected=f"a Chakra ET protobuf stream (messages of 1 .. {MAX_MESSAGE_BYTES:,} bytes)",
            )
        body = stream.read(n)
        if len(body) < n:
            raise InputError(
                f"message {k} is cut off ({n:,} bytes announced, {len(body):,} left)",
                where=where,
                expected="a complete Chakra ET file",
            )
        yield body
        k += 1


def _input_bytes(node: _Node) -> float:
    """Bytes of a node's tensor inputs from its ``shapes`` and ``types`` strings."""
    try:
        shapes = json.loads(node.shapes) if node.shapes else []
        types = ast.literal_eval(node.types) if node.types and len(node.types) < 100_000 else []
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return 0.0
    total = 0.0
    for shape, type_name in zip(shapes, types, strict=False) if isinstance(types, list) else ():
        inner = str(type_name)
        if "Tensor(" not in inner:
            continue
        dtype = inner[inner.index("Tensor(") : inner.index(")", inner.index("Tensor(")) + 1]
        total += _sum_shapes(shape) * element_size(dtype)
    return total


def _sum_shapes(shape: Any) -> float:
    if isinstance(shape, list) and all(isinstance(d, int) for d in shape):
        return float(math.prod(shape)) if shape else 0.0
    return sum(_sum_shapes(s) for s in shape) if isinstance(shape, list) else 0.0


def _collective(node: _Node) -> Collective:
    size = node.attrs.get("comm_size")
    kind = node.attrs.get("comm_type")
    return Collective(
        name=node.name,
        kind=COMM_TYPES[kind] if isinstance(kind, int) and 0 <= kind < len(COMM_TYPES) else "",
        size_bytes=float(size) if isinstance(size, int | float) else _input_bytes(node),
        group=str(node.attrs.get("pg_name") or ""),
    )


@dataclass(slots=True)
class _Tally:
    """What is kept of the nodes while they stream by: counts, GPU time and the collectives."""

    nodes: int = 0
    compute: int = 0
    gpu_us: list[int] = field(default_factory=list)
    collectives: list[Collective] = field(default_factory=list)

    def add(self, n: _Node, where: str) -> None:
        self.nodes += 1
        if n.type == COMP_NODE:
            self.compute += 1
            if n.attrs.get("is_cpu_op") == 0:
                self.gpu_us.append(n.duration_us)
        elif n.type == COMM_COLL_NODE:
            if len(self.collectives) >= MAX_COLLECTIVES:
                raise InputError(
                    f"more than {MAX_COLLECTIVES:,} collective nodes",
                    where=where,
                    expected="a Chakra ET of one rank",
                )
            self.collectives.append(_collective(n))


def read_chakra_stream(stream: TraceStream, *, where: str) -> ExecutionTrace:
    """The compute and collective nodes of a Chakra ET read from ``stream``, one message at a time.

    Memory stays bounded by the largest message and what is kept of the nodes (counts, the collectives),
    whatever the file holds.

    Raises
    ------
    InputError
        A truncated stream, an empty or oversized message, a message that is not protobuf, or no nodes.
    """
    tally, version = _Tally(), ""
    for k, m in enumerate(_messages(stream, where)):
        try:
            if k == 0:
                version = _metadata_version(m)
                continue
            node = _node(m)
        except (_TruncatedError, ValueError, UnicodeDecodeError):
            raise InputError(
                f"message {k} is not a protobuf message", where=where, expected="a Chakra ET protobuf stream"
            ) from None
        tally.add(node, where)
    if not tally.compute and not tally.collectives:
        raise InputError("no compute or communication nodes", where=where, expected="a Chakra ET of one rank")
    return ExecutionTrace(
        format="chakra-et",
        schema=version,
        source=where,
        compute_nodes=tally.compute,
        collectives=tuple(tally.collectives),
        compute_s=sum(tally.gpu_us) * 1e-6 if tally.gpu_us else None,  # us -> s
    )


def read_chakra_et(data: bytes, *, where: str) -> ExecutionTrace:
    """The compute and collective nodes of a Chakra ET given as bytes (see :func:`read_chakra_stream`).

    Examples
    --------
    >>> from pathlib import Path
    >>> f = Path("/work/shared/data/chakra-traces/chakra.0.et")
    >>> et = read_chakra_et(f.read_bytes(), where=f.name) if f.exists() else None
    >>> (et.compute_nodes, len(et.collectives)) if et else (3643, 21)
    (3643, 21)
    """
    stream = TraceStream(io.BytesIO(data), where=where, max_bytes=len(data))
    return read_chakra_stream(stream, where=where)


def _metadata_version(buf: bytes) -> str:
    """The ``schema`` attribute (or ``version`` field) of the ``GlobalMetadata`` message."""
    version = ""
    for number, wire, v in _fields(buf):
        if number == 1 and wire == _LEN:
            version = v.decode("utf-8", "replace")
        elif number == 2 and wire == _LEN:
            key, value = _attribute(v)
            if key == "schema" and isinstance(value, str):
                version = value
    return version
