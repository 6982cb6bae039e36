"""The model twin of a runtime run: ``commsched intrajob``'s iteration-time engine, same inputs.

The prediction uses the bytes the runtime really sends (the zoo's per-layer sizes times the run's
byte scale), the per-worker capacity the link really delivers (measured TCP goodput / workers:
runtime-notes §12.1, capacity = goodput) and each transport's own knobs:

* ``fifo``: :func:`~commsched.intrajob.partitioned.partitioned_push` in FIFO order with BytePS's
  4,096,000-byte parts, no credit limit, no startup (each part's pull follows its push);
* ``p3``: priority per part, one part in the transmission queue at a time (no startup);
* ``bytescheduler``: the same engine with the run's partition, credit and ByteScheduler's startup;
* ``mercury``: :func:`~commsched.intrajob.partitioned.mercury_packets` at the run's packet size.
"""

from __future__ import annotations

from collections.abc import Sequence

from commsched.experiments.ps.emulate import EmulatedLayer
from commsched.intrajob.iteration import CommPolicy, iteration_time
from commsched.intrajob.partitioned import DEFAULT_STARTUP_S, PartitionConfig, bytescheduler, mercury_packets
from commsched.intrajob.problem import make_problem
from commsched.runtime.ps.transports import TransportConfig

#: bytes per float32 gradient element
F32_BYTES = 4


def transport_policy(config: TransportConfig) -> CommPolicy:
    """The intrajob policy that models ``config``.

    Examples
    --------
    >>> transport_policy(TransportConfig(name="mercury")).__name__
    'mercury'
    """
    kind = config.kind
    if kind.packets:
        return mercury_packets(config.packet_bytes)
    if kind.credit:
        cfg = PartitionConfig(
            partition_bytes=config.partition_bytes,
            credit_bytes=config.credit_bytes,
            startup_s=DEFAULT_STARTUP_S,
            priority=kind.prioritized,
        )
    elif kind.prioritized:
        cfg = PartitionConfig(partition_bytes=config.partition_bytes, credit_bytes=None, startup_s=0.0)
    else:
        cfg = PartitionConfig(
            partition_bytes=config.partition_bytes, credit_bytes=float("inf"), startup_s=0.0, priority=False
        )
    return bytescheduler(cfg)


def predicted_iteration_s(
    layers: Sequence[EmulatedLayer], *, bandwidth_bps: float, config: TransportConfig
) -> float:
    """Mercury Eq. (5) iteration time of the emulated layers under ``config`` at ``bandwidth_bps``.

    Examples
    --------
    >>> ly = [EmulatedLayer(name="a", elements=250_000, fp_s=0.1, bp_s=0.1)]
    >>> round(predicted_iteration_s(ly, bandwidth_bps=8e6, config=TransportConfig(name="fifo")), 3)
    2.2
    """
    problem = make_problem(
        bandwidth_bps=bandwidth_bps,
        size_bytes=[ly.elements * F32_BYTES for ly in layers],
        bp_s=[ly.bp_s for ly in layers],
        fp_s=[ly.fp_s for ly in layers],
        names=[ly.name for ly in layers],
    )
    return iteration_time(problem, transport_policy(config))
