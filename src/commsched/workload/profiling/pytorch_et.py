"""PyTorch execution traces (what ``torch.profiler.ExecutionTraceObserver`` writes): nodes of one rank.

The file is JSON: ``schema``, ``pid``, ``time`` and ``nodes``, each node with ``id``, ``name``,
``ctrl_deps`` (its parent's id), ``inputs``/``outputs`` (``values``, ``shapes``, ``types``) and ``attrs``.
A tensor value is ``[tensor id, storage id, offset, elements, element size, device]``.

What is read:

* **collectives**, in the order they started: the process-group backend's operations, named
  ``BACKEND:OP`` (``nccl:all_gather``, ``gloo:all_reduce``), not their ``c10d::*`` dispatcher parents nor
  the ``record_param_comms`` spans around them (the same operation two or three times over); a trace
  without backend-level nodes falls back to the ``c10d::*`` operations. Bytes are the operation's input
  tensors (elements x element size summed). The process group is the ``pg_name`` of the
  ``## process_group:init ##`` entry whose ``backend_id`` (or name) the enclosing ``record_param_comms``
  names, or the only group of the trace.
  A ``c10d::*`` operation that no backend node pairs (the first after it, in id order, whose tensors
  are among its own) stands for one the observer lost (it writes a backend's node when the work ends, on the
  backend's thread, and drops it after it stopped): it is named as the trace's backend names its
  operations (``gloo:all_reduce``).
* **compute nodes**: operator nodes at any depth that are not communication (collectives, ``c10d::*``,
  ``record_param_comms``) nor process-group records (``## ... ##``), the root and thread nodes left out:
  the observer nests whatever runs while a collective is open under it, depending on timing, and a count
  of top-level operators would differ between identical ranks.

References
----------
.. [1] PyTorch, ``torch/csrc/profiler/standalone/execution_trace_observer.cpp``.
.. [2] MLCommons Chakra, ``et_converter/pytorch2chakra_converter.py`` (what a PyTorch ET holds).
"""

from __future__ import annotations

import json
import math
from typing import Any

from commsched.errors import InputError
from commsched.workload.profiling.kineto_events import (
    C10D_OPS,
    COLLECTIVE_RE,
    config_backend,
    dispatcher_kind,
)
from commsched.workload.profiling.records import Collective, ExecutionTrace
from commsched.workload.profiling.types import element_size

_THREAD = "[pytorch|profiler|execution_trace|thread]"
_ROOT = "[pytorch|profiler|execution_trace|process]"
_COMM_NAMES = ("record_param_comms",)


def _is_tensor(v: Any) -> bool:
    return (
        isinstance(v, list)
        and len(v) == 6
        and all(isinstance(x, int) and not isinstance(x, bool) for x in v[:5])
    )


def _tensor_bytes(value: Any) -> float:
    """Bytes of every tensor in a (nested) input value."""
    if _is_tensor(value):
        return float(value[3] * value[4])
    if isinstance(value, list):
        return sum(_tensor_bytes(v) for v in value)
    return 0.0


def _shape_bytes(shape: Any, type_name: str) -> float:
    if isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        return float(math.prod(shape) * element_size(type_name))
    return 0.0


def _input_bytes(node: dict[str, Any]) -> float:
    raw = node.get("inputs")
    inputs: dict[str, Any] = raw if isinstance(raw, dict) else {}
    size = _tensor_bytes(inputs.get("values", []))
    if size > 0:
        return size
    types, shapes = inputs.get("types", []), inputs.get("shapes", [])
    return sum(
        _shape_bytes(s, t) for s, t in zip(shapes, types, strict=False) if str(t).startswith("Tensor(")
    )


def _groups(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for n in nodes:
        if n.get("name") == "## process_group:init ##":
            vals = (n.get("inputs") or {}).get("values") or []
            try:
                parsed = json.loads(vals[0]) if vals and isinstance(vals[0], str) else []
            except json.JSONDecodeError:
                parsed = []
            return [g for g in parsed if isinstance(g, dict)] if isinstance(parsed, list) else []
    return []


def _group_of(node: dict[str, Any], by_id: dict[Any, dict[str, Any]], groups: list[dict[str, Any]]) -> str:
    names = {g.get("backend_id"): str(g.get("pg_name", "")) for g in groups if "backend_id" in g}
    names |= {str(g.get("pg_name")): str(g.get("pg_name")) for g in groups if "pg_name" in g}
    cur: dict[str, Any] | None = node
    seen = 0
    while cur is not None and seen < 64:
        if cur.get("name") in _COMM_NAMES:
            for v in (cur.get("inputs") or {}).get("values") or []:
                key = (
                    v if isinstance(v, int) and not isinstance(v, bool) else v if isinstance(v, str) else None
                )
                if key is not None and key in names:
                    return names[key]
        cur, seen = by_id.get(cur.get("ctrl_deps")), seen + 1
    return str(groups[0].get("pg_name", "")) if len(groups) == 1 else ""


def _collective_nodes(
    nodes: list[dict[str, Any]], groups: list[dict[str, Any]]
) -> list[tuple[dict[str, Any], str]]:
    """The collective nodes in the order they started, each with its name: by node id, which the
    observer gives on entry (a node is written when it ends, and a backend's collectives may end out of
    order). A backend's node is written when its work ends, on the backend's thread, and the observer
    drops it when that comes after it stopped (the last bucket of a step, on a busy machine); its nesting
    depends on timing too. So each ``c10d::*`` operation is paired, in id order, with the first unpaired
    backend node after it whose tensors are among its own, and one left without a pair stands for its
    lost node, named after the backend the others (or else the process groups) name."""
    backend = [n for n in nodes if COLLECTIVE_RE.match(str(n.get("name", "")))]
    prefixes = {str(n["name"]).split(":")[0] for n in backend} or {
        config_backend(g.get("backend_config")) for g in groups
    } - {""}
    prefix = prefixes.pop() if len(prefixes) == 1 else ""
    chosen = [(n, str(n["name"])) for n in backend]
    free = sorted(backend, key=_order)
    for n in sorted(nodes, key=_order):
        name = str(n.get("name", ""))
        op = name.removeprefix("c10d::")
        if not name.startswith("c10d::") or (backend and op not in C10D_OPS):
            continue
        mine = _tensor_ids((n.get("inputs") or {}).get("values", []))
        pair = next((b for b in free if _order(b) > _order(n) and _pairs(b, mine)), None)
        if pair is not None:
            free.remove(pair)
        else:
            chosen.append((n, f"{prefix}:{C10D_OPS[op]}" if prefix and op in C10D_OPS else name))
    if all(isinstance(n["id"], int) for n, _ in chosen):
        chosen.sort(key=lambda c: c[0]["id"])
    return chosen


def _tensor_ids(value: Any) -> set[int]:
    """Ids of every tensor in a (nested) input value."""
    if _is_tensor(value):
        return {value[0]}
    return set().union(*(_tensor_ids(v) for v in value)) if isinstance(value, list) else set()


def _pairs(backend: dict[str, Any], ids: set[int]) -> bool:
    """Whether a backend node works on tensors of the dispatcher operation with tensor ids ``ids``."""
    theirs = _tensor_ids((backend.get("inputs") or {}).get("values", []))
    return bool(theirs) and theirs <= ids


def _order(n: dict[str, Any]) -> float:
    return float(n["id"]) if isinstance(n["id"], int | float) else 0.0


def _compute_count(nodes: list[dict[str, Any]], comm: set[Any]) -> int:
    """Operator nodes at any depth that are not communication nor process-group records: the observer
    nests what runs while a collective is open under it, more or less depending on timing, so that two
    identical ranks may differ in nesting but not in this count."""
    return sum(
        1 for n in nodes
        if n["id"] not in comm and n.get("name") not in (_THREAD, _ROOT)
        and not str(n.get("name", "")).startswith(("##", "c10d::")) and n.get("name") not in _COMM_NAMES
        and not COLLECTIVE_RE.match(str(n.get("name", "")))
    )  # fmt: skip


def _check(doc: dict[str, Any], where: str) -> list[dict[str, Any]]:
    nodes = doc.get("nodes")
    if not isinstance(nodes, list) or not isinstance(doc.get("schema"), str):
        raise InputError(
            "not a PyTorch execution trace (no schema and nodes)",
            where=where,
            expected="ExecutionTraceObserver JSON or a Chakra ET protobuf",
        )
    bad = next((k for k, n in enumerate(nodes) if not isinstance(n, dict) or "id" not in n), None)
    if bad is not None:
        raise InputError("a node without an id", where=f"{where}: nodes[{bad}]", expected="{id, name, ...}")
    return nodes


def read_pytorch_et(doc: dict[str, Any], *, where: str) -> ExecutionTrace:
    """The compute nodes and collectives of a parsed PyTorch execution trace.

    Examples
    --------
    >>> from pathlib import Path
    >>> f = Path("/work/shared/data/chakra-traces/pytorch-et-1.0.2-chakra.0.0.4.json")
    >>> et = read_pytorch_et(json.loads(f.read_text()), where=f.name) if f.exists() else None
    >>> first = et.collectives[0] if et else None
    >>> (first.name, first.size_bytes, first.group) if first else ('nccl:all_gather', 4.0, '0')
    ('nccl:all_gather', 4.0, '0')
    """
    nodes = _check(doc, where)
    by_id = {n["id"]: n for n in nodes}
    groups = _groups(nodes)
    colls = _collective_nodes(nodes, groups)
    collectives = tuple(
        Collective(
            name=name,
            size_bytes=_input_bytes(n),
            group=_group_of(n, by_id, groups),
            kind=dispatcher_kind(name),
        )
        for n, name in colls
    )
    return ExecutionTrace(
        format="pytorch-et",
        schema=str(doc.get("schema")),
        source=where,
        compute_nodes=_compute_count(nodes, {n["id"] for n, _ in colls}),
        collectives=collectives,
    )
