"""Parsers of third-party model-profile files, and (de)serialisation of the shipped model zoo.

This is an edge module: every function takes a path (or text) and returns typed records; nothing is read
at import time. The formats:

* PipeDream ``graph.txt`` (``nodeN -- <module> -- forward_compute_time=<ms>, backward_compute_time=<ms>,
  activation_size=<B>, parameter_size=<B>`` node lines, ``\\tnodeA -- nodeB`` edge lines).
* Tiresias ``model_tensor_sizes_mb.csv`` (``model_name,tensor_index,tensor_size_mb``; MB = MiB).
* ASTRA-sim 1.0 / SimAI / AICB 12-field workload files (header line, layer count, one line per layer:
  ``name reserved fwd_compute fwd_comm_type fwd_comm_bytes ig_compute ig_comm_type ig_comm_bytes
  wg_compute wg_comm_type wg_comm_bytes update_delay``).

References
----------
.. [1] Narayanan et al., "PipeDream", SOSP 2019 (``profiler/*/profiles/*/graph.txt``).
.. [2] Gu et al., "Tiresias", NSDI 2019 (``simulator/models.py``).
.. [3] Rashidi et al., "ASTRA-sim", ISPASS 2020, ``inputs/workload/README.md``; Wang et al., "SimAI",
   NSDI 2025.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commsched.errors import InputError
from commsched.workload.records import LayerProfile, ModelProfile, ProfileProvenance

_NODE_RE = re.compile(
    r"^(node\d+) -- (.*) -- forward_compute_time=([0-9.eE+-]+), backward_compute_time=([0-9.eE+-]+), "
    r"activation_size=(.*), parameter_size=([0-9.eE+-]+)\s*$"
)
_EDGE_RE = re.compile(r"^\s+(node\d+) -- (node\d+)\s*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphNode:
    """One node of a PipeDream profile graph (times in milliseconds as in the file)."""

    node_id: str
    module: str
    forward_ms: float
    backward_ms: float
    parameter_bytes: float


def read_pipedream_graph(path: str | Path) -> tuple[GraphNode, ...]:
    """Parse a PipeDream ``graph.txt`` and return its nodes in a topological (forward) order.

    Ties between ready nodes are broken by node number, so the order is deterministic.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> text = ("node2 -- Linear(2, 2) -- forward_compute_time=1.0, backward_compute_time=2.0, "
    ...         "activation_size=8.0, parameter_size=24.000\\n"
    ...         "node1 -- Input0 -- forward_compute_time=0.0, backward_compute_time=0.0, "
    ...         "activation_size=0.0, parameter_size=0.000\\n\\tnode1 -- node2\\n")
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = pathlib.Path(d, "g.txt"); _ = p.write_text(text)
    ...     [n.node_id for n in read_pipedream_graph(p)]
    ['node1', 'node2']

    References
    ----------
    PipeDream ``graph/graph.py`` (``Graph.from_str``).
    """
    path = Path(path)
    nodes, edges = _parse_pipedream(path)
    indeg = dict.fromkeys(nodes, 0)
    succ: dict[str, list[str]] = {k: [] for k in nodes}
    for a, b in edges:
        if a not in nodes or b not in nodes:
            raise InputError(f"edge {a} -- {b} names an undefined node", where=str(path))
        succ[a].append(b)
        indeg[b] += 1

    def num(k: str) -> int:
        return int(k[4:])

    ready = sorted((k for k, d in indeg.items() if d == 0), key=num)
    order: list[str] = []
    while ready:
        k = ready.pop(0)
        order.append(k)
        for b in succ[k]:
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
        ready.sort(key=num)
    if len(order) != len(nodes):
        raise InputError("the profile graph has a cycle", where=str(path), expected="a DAG")
    return tuple(nodes[k] for k in order)


def _parse_pipedream(path: Path) -> tuple[dict[str, GraphNode], list[tuple[str, str]]]:
    """The nodes (by id, in file order) and edges of a PipeDream ``graph.txt``."""
    nodes: dict[str, GraphNode] = {}
    edges: list[tuple[str, str]] = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        if e := _EDGE_RE.match(line):
            edges.append((e.group(1), e.group(2)))
            continue
        n = _NODE_RE.match(line)
        if n is None:
            raise InputError(
                "unparsable line", where=f"{path}:{lineno}", expected="a PipeDream node or edge line"
            )
        nodes[n.group(1)] = GraphNode(
            node_id=n.group(1),
            module=n.group(2).strip(),
            forward_ms=float(n.group(3)),
            backward_ms=float(n.group(4)),
            parameter_bytes=float(n.group(6)),
        )
    return nodes, edges


def pipedream_layers(nodes: tuple[GraphNode, ...]) -> tuple[LayerProfile, ...]:
    """Layers of a PipeDream graph: drop ``Input*`` nodes (their time is data loading, not compute) and
    nodes with zero time and zero parameters; convert ms to s.

    Examples
    --------
    >>> n = GraphNode(node_id="node2", module="ReLU()", forward_ms=1.0, backward_ms=2.0, parameter_bytes=0.0)
    >>> pipedream_layers((n,))[0].backward_s
    0.002
    """
    out = []
    for n in nodes:
        if n.module.startswith("Input"):
            continue
        if n.forward_ms == 0 and n.backward_ms == 0 and n.parameter_bytes == 0:
            continue
        out.append(
            LayerProfile(
                name=f"{n.node_id}:{n.module.split('(')[0]}",
                forward_s=n.forward_ms / 1000.0,  # ms -> s
                backward_s=n.backward_ms / 1000.0,  # ms -> s
                param_bytes=n.parameter_bytes,
            )
        )
    return tuple(out)


def read_tiresias_tensors(path: str | Path, model: str) -> tuple[float, ...]:
    """Gradient tensor sizes in bytes of ``model`` from Tiresias ``model_tensor_sizes_mb.csv`` (MiB).

    Raises
    ------
    InputError
        The file lacks the model.
    """
    path = Path(path)
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["model_name"] == model]
    if not rows:
        raise InputError(f"no tensors of model {model!r}", where=str(path))
    rows.sort(key=lambda r: int(r["tensor_index"]))
    return tuple(float(r["tensor_size_mb"]) * 2**20 for r in rows)  # MiB -> bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadLayer:
    """One layer line of an ASTRA-sim / SimAI workload file (compute in the file's time unit)."""

    name: str
    fwd_compute: float
    fwd_comm: str
    fwd_bytes: float
    ig_compute: float
    ig_comm: str
    ig_bytes: float
    wg_compute: float
    wg_comm: str
    wg_bytes: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """An ASTRA-sim 1.0 / SimAI workload file: header tokens and layer lines."""

    header: tuple[str, ...]
    layers: tuple[WorkloadLayer, ...]

    def header_value(self, key: str) -> str | None:
        """Value after ``key`` in the header (``key`` with or without the trailing colon)."""
        toks = self.header
        for i, t in enumerate(toks[:-1]):
            if t.rstrip(":") == key.rstrip(":"):
                return toks[i + 1]
        return None


def read_workload(path: str | Path) -> Workload:
    """Parse an ASTRA-sim 1.0 / SimAI / AICB workload text file.

    Raises
    ------
    InputError
        A malformed line or a layer count that does not match.
    """
    path = Path(path)
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    if len(lines) < 2:
        raise InputError("too short", where=str(path), expected="header, layer count, layer lines")
    header = tuple(lines[0].split())
    try:
        count = int(lines[1].split()[0])
    except ValueError:
        raise InputError("bad layer count", where=f"{path}:2", expected="an integer") from None
    layers = []
    for lineno, line in enumerate(lines[2:], start=3):
        f = line.split()
        if len(f) < 11:
            raise InputError("layer line has too few fields", where=f"{path}:{lineno}", expected="12 fields")
        try:
            layers.append(
                WorkloadLayer(
                    name=f[0],
                    fwd_compute=float(f[2]),
                    fwd_comm=f[3],
                    fwd_bytes=float(f[4]),
                    ig_compute=float(f[5]),
                    ig_comm=f[6],
                    ig_bytes=float(f[7]),
                    wg_compute=float(f[8]),
                    wg_comm=f[9],
                    wg_bytes=float(f[10]),
                )
            )
        except ValueError:
            raise InputError("non-numeric field", where=f"{path}:{lineno}", expected="numbers") from None
    if len(layers) != count:
        raise InputError(f"{len(layers)} layer lines, header says {count}", where=str(path))
    return Workload(header=header, layers=tuple(layers))


# --- the shipped zoo as JSON ----------------------------------------------------------------------------


def profile_to_dict(p: ModelProfile) -> dict[str, Any]:
    """A JSON-able dict of a profile (layers as ``[name, forward_s, backward_s, param_bytes]`` rows)."""
    return {
        "name": p.name,
        "gpu": p.gpu,
        "compute_s": p.compute_s,
        "sync_bytes": p.sync_bytes,
        "overlap": p.overlap,
        "family": p.family,
        "batch_size": p.batch_size,
        "flops_per_iteration": p.flops_per_iteration,
        "aliases": list(p.aliases),
        "source": p.source,
        "notes": p.notes,
        **({"precision": p.precision} if p.precision else {}),
        **({"provenance": provenance_to_dict(p.provenance)} if p.provenance else {}),
        "layers": [[ly.name, ly.forward_s, ly.backward_s, ly.param_bytes] for ly in p.layers],
    }


def provenance_to_dict(p: ProfileProvenance) -> dict[str, Any]:
    """A JSON-able dict of a profile's structured provenance."""
    return {"kind": p.kind, "reference": p.reference, "assumptions": list(p.assumptions)}


def provenance_from_dict(d: dict[str, Any]) -> ProfileProvenance:
    """Inverse of :func:`provenance_to_dict` (raises ``KeyError``/``TypeError`` when malformed)."""
    if not isinstance(d, dict) or not isinstance(d.get("assumptions", []), list):
        raise TypeError("provenance is not an object with an 'assumptions' list")
    return ProfileProvenance(
        kind=str(d["kind"]),
        reference=str(d["reference"]),
        assumptions=tuple(str(a) for a in d.get("assumptions", ())),
    )


def profile_from_dict(d: dict[str, Any], *, where: str = "") -> ModelProfile:
    """Inverse of :func:`profile_to_dict`."""
    try:
        return ModelProfile(
            name=str(d["name"]),
            gpu=str(d["gpu"]),
            compute_s=float(d["compute_s"]),
            sync_bytes=float(d["sync_bytes"]),
            overlap=float(d["overlap"]),
            family=str(d.get("family", "")),
            batch_size=None if d.get("batch_size") is None else int(d["batch_size"]),
            flops_per_iteration=None
            if d.get("flops_per_iteration") is None
            else float(d["flops_per_iteration"]),
            aliases=tuple(str(a) for a in d.get("aliases", ())),
            source=str(d["source"]),
            notes=str(d.get("notes", "")),
            precision=str(d.get("precision", "")),
            provenance=None if d.get("provenance") is None else provenance_from_dict(d["provenance"]),
            layers=tuple(
                LayerProfile(
                    name=str(r[0]), forward_s=float(r[1]), backward_s=float(r[2]), param_bytes=float(r[3])
                )
                for r in d.get("layers", ())
            ),
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise InputError(
            f"malformed model profile ({exc})", where=where, expected="a model-zoo entry"
        ) from None


def read_zoo_json(path: str | Path) -> tuple[ModelProfile, ...]:
    """Read a model-zoo JSON file (``{"provenance": ..., "models": [...]}``)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON ({exc.msg})", where=f"{path}:{exc.lineno}") from None
    return zoo_from_json_doc(doc, where=str(path))


def zoo_from_json_doc(doc: Any, *, where: str = "") -> tuple[ModelProfile, ...]:
    """Profiles from a parsed model-zoo JSON document."""
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), list):
        raise InputError("no 'models' list", where=where, expected='{"provenance": ..., "models": [...]}')
    return tuple(profile_from_dict(m, where=f"{where}: models[{i}]") for i, m in enumerate(doc["models"]))


def write_zoo_json(profiles: tuple[ModelProfile, ...], path: str | Path, *, provenance: str) -> None:
    """Write profiles as a model-zoo JSON file (deterministic: same profiles, same bytes)."""
    doc = {"provenance": provenance, "models": [profile_to_dict(p) for p in profiles]}
    Path(path).write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
