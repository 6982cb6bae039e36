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
import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any

from commsched.errors import InputError
from commsched.workload.profiling.records import Collective, ExecutionTrace
from commsched.workload.profiling.types import element_size

COMP_NODE = 4
COMM_COLL_NODE = 7
_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_INT_VALUES = {7, 9, 11, 13, 27}  # int32, int64, uint32, uint64, bool
_ZIGZAG_VALUES = {15, 17}  # sint32, sint64
_STRING_VALUE = 29
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


def _messages(data: bytes, where: str) -> list[bytes]:
    out: list[bytes] = []
    i = 0
    while i < len(data):
        try:
            n, j = _varint(data, i)
        except _TruncatedError:
            raise InputError(
                "truncated message length", where=f"{where}: byte {i}", expected="a Chakra ET"
            ) from None
        if j + n > len(data):
            raise InputError(
                f"message {len(out)} is cut off ({n:,} bytes announced, {len(data) - j:,} left)",
                where=where,
                expected="a complete Chakra ET file",
            )
        out.append(data[j : j + n])
        i = j + n
    return out


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


def read_chakra_et(data: bytes, *, where: str) -> ExecutionTrace:
    """The compute and collective nodes of a Chakra ET (protobuf bytes).

    Raises
    ------
    InputError
        A truncated stream, a message that is not protobuf, or no nodes.

    Examples
    --------
    >>> from pathlib import Path
    >>> f = Path("/work/shared/data/chakra-traces/chakra.0.et")
    >>> et = read_chakra_et(f.read_bytes(), where=f.name) if f.exists() else None
    >>> (et.compute_nodes, len(et.collectives)) if et else (3643, 21)
    (3643, 21)
    """
    messages = _messages(data, where)
    nodes, version = [], ""
    for k, m in enumerate(messages):
        try:
            if k == 0:
                version = _metadata_version(m)
                continue
            nodes.append(_node(m))
        except (_TruncatedError, ValueError, UnicodeDecodeError):
            raise InputError(
                f"message {k} is not a protobuf message", where=where, expected="a Chakra ET protobuf stream"
            ) from None
    if not nodes or not any(n.type in (COMP_NODE, COMM_COLL_NODE) for n in nodes):
        raise InputError("no compute or communication nodes", where=where, expected="a Chakra ET of one rank")
    gpu = [n.duration_us for n in nodes if n.type == COMP_NODE and n.attrs.get("is_cpu_op") == 0]
    return ExecutionTrace(
        format="chakra-et",
        schema=version,
        source=where,
        compute_nodes=sum(1 for n in nodes if n.type == COMP_NODE),
        collectives=tuple(_collective(n) for n in nodes if n.type == COMM_COLL_NODE),
        compute_s=sum(gpu) * 1e-6 if gpu else None,  # us -> s
    )


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
