"""Typed records of measured training steps and execution traces.

A :class:`StepProfile` is what ``commsched profile`` measures or reads from a Kineto trace: forward and
backward time per iteration, per-layer times, the gradient-ready timeline and gradient bytes, the
collectives a distributed trace shows, and where every number comes from (:class:`Provenance`). An
:class:`ExecutionTrace` is what a PyTorch or Chakra execution trace of one rank holds: its compute and
communication nodes.

Units are in the names: ``*_s`` seconds, ``*_bytes`` bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from commsched.workload.records import LayerProfile


@dataclass(frozen=True, slots=True, kw_only=True)
class GradientReady:
    """One parameter tensor's gradient: its size and when it was ready.

    Attributes
    ----------
    name
        The parameter (``layer1.0.conv1.weight``) or, from a trace, the shape it was recorded with.
    size_bytes
        Bytes of the gradient (elements x element size of the parameter's dtype).
    ready_s
        Seconds from the start of the backward pass until the gradient was accumulated.
    """

    name: str
    size_bytes: float
    ready_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Collective:
    """One collective operation of a distributed trace.

    Attributes
    ----------
    name
        The operation as the trace names it (``nccl:all_reduce``, ``gloo:all_reduce``, ...).
    size_bytes
        Bytes of the operation's input on this rank (elements x element size).
    group
        The process group (its name in the trace), or ``""`` where the trace does not say.
    kind
        The collective (``all_reduce``, ``ALL_GATHER`` ...) where the trace says, else ``""``.
    """

    name: str
    size_bytes: float
    group: str = ""
    kind: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """Where a measured profile comes from.

    Attributes
    ----------
    source
        The tool and input: ``commsched profile examples/tiny.py:build`` or ``kineto trace.json.gz``.
    device
        ``cpu`` or ``cuda``.
    device_name
        The processor or GPU as the system names it (``NVIDIA H200``).
    precision
        ``fp32`` or ``bf16`` (bf16: autocast, parameters and gradients stay fp32), or ``""`` when unknown.
    torch
        The PyTorch version that measured it (``""`` when unknown).
    date
        When it was measured (ISO 8601, UTC), or ``""`` when unknown.
    batch_size
        Samples per iteration on this device, where known.
    warmup, iterations
        Warm-up and timed iterations (a trace counts its own iterations, without warm-up).
    """

    source: str
    device: str
    device_name: str
    precision: str = ""
    torch: str = ""
    date: str = ""
    batch_size: int | None = None
    warmup: int = 0
    iterations: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class StepProfile:
    """A measured training step of one worker.

    Attributes
    ----------
    name
        A name for the model (the scenario's job reports show it).
    forward_s, backward_s
        Median forward and backward time per iteration (on a GPU, busy GPU time).
    sync_bytes
        Gradient bytes synchronised per iteration (the sum over parameter tensors).
    layers
        Per-layer profile in forward order (sums equal ``forward_s``, ``backward_s``, ``sync_bytes``).
    gradients
        The gradient-ready timeline, in the order the gradients were accumulated.
    forward_all, backward_all
        The per-iteration values the medians come from.
    collectives
        Collectives of a distributed trace (empty for a single-process measurement).
    params
        Parameter count (of the parameters that get a gradient), where known.
    unused_params, frozen_params
        Parameters that got no gradient in the step, and frozen ones (``requires_grad=False``): neither
        is counted in ``sync_bytes`` (data parallelism does not synchronise them).
    spread
        ``(max - min) / median`` of the timed iterations' compute times
        (:func:`commsched.workload.profiling.quality.spread`), ``None`` with one iteration.
    warnings
        What the reader or measurement found doubtful (one line each).
    """

    name: str
    forward_s: float
    backward_s: float
    sync_bytes: float
    provenance: Provenance
    layers: tuple[LayerProfile, ...] = ()
    gradients: tuple[GradientReady, ...] = ()
    forward_all: tuple[float, ...] = ()
    backward_all: tuple[float, ...] = ()
    collectives: tuple[Collective, ...] = ()
    params: int | None = None
    unused_params: tuple[str, ...] = ()
    frozen_params: tuple[str, ...] = ()
    spread: float | None = None
    warnings: tuple[str, ...] = ()

    @property
    def compute_s(self) -> float:
        """Forward + backward time per iteration."""
        return self.forward_s + self.backward_s

    @property
    def overlap(self) -> float:
        """Fraction of the compute after which gradients start to be ready (the forward pass)."""
        return self.forward_s / self.compute_s if self.compute_s > 0 else 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionTrace:
    """The nodes of one rank's execution trace (PyTorch ET JSON or Chakra ET protobuf).

    Attributes
    ----------
    format
        ``pytorch-et`` or ``chakra-et``.
    schema
        The schema version the trace declares.
    compute_nodes
        Compute nodes: Chakra ``COMP_NODE``\\ s; in a PyTorch ET, operator nodes that are not
        communication (the root and thread nodes left out).
    collectives
        The collective nodes, one per operation (see :func:`commsched.workload.profiling.read_pytorch_et`
        for which nodes of a PyTorch ET count).
    compute_s
        Sum of the durations of the GPU compute nodes where the trace records them, else ``None``.
    """

    format: str
    schema: str
    source: str
    compute_nodes: int
    collectives: tuple[Collective, ...]
    compute_s: float | None = None
