"""First-fit placement: the production scheduler of the Crux trace, as the paper describes it.

Crux §2.1 (Fig. 6) describes the production cluster's own scheduler as one that "tries to pack a job into
one host or one switch"; beyond that it does not look at the topology. Modelled as first fit in topology
order (no best fit, no look-ahead):

* a job that fits in one host gets the first host (topology order) with enough free GPUs;
* else a job that fits under one ToR gets the first ToR with enough free GPUs (its hosts in order);
* else the first ``n`` free GPUs in topology order, wherever they are.

The free GPUs are read from an index (:class:`~commsched.scheduling.freegpus.FreeGpus`): a
placement costs ``O(log hosts)`` plus the hosts it takes GPUs from.

Under arrivals and departures this leaves the cluster fragmented the way the trace is: jobs that do not
fit in one switch end up on whatever hosts are free, straddling ToRs that other jobs use too. It is the
placement of Crux's "None" (no job scheduler) bars; :func:`~commsched.scheduling.placement.pack` is the
better locality packer (best fit at every level).

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §2.1 (Fig. 6) and §6.4 (Fig. 25, "None").
"""

from __future__ import annotations

from commsched.scheduling.freegpus import free_index
from commsched.scheduling.interfaces import Allocation, PlacementRequest


def first_fit(req: PlacementRequest) -> Allocation | None:
    """Place ``req.job`` first-fit: one host, else one ToR, else the first free GPUs; ``None`` if short.

    Examples
    --------
    >>> from commsched.scheduling.interfaces import PlacementRequest
    >>> from commsched.topology.builders import build_topology
    >>> from commsched.workload.records import JobId, JobSpec
    >>> from commsched.workload.zoo import get_model
    >>> topo = build_topology("two_layer_clos", {"tors": 2, "aggs": 2, "hosts_per_tor": 2})
    >>> free = frozenset(topo.gpus[4:])  # host 0 has 4 free GPUs
    >>> job = JobSpec(id=JobId("j"), profile=get_model("bert-base"), gpus=12)
    >>> alloc = first_fit(PlacementRequest(job=job, topology=topo, free_gpus=free))
    >>> [str(g) for g in alloc.gpus][:2], len(alloc.gpus)
    (['h0/gpu4', 'h0/gpu5'], 12)
    """
    n = req.job.gpus
    free = free_index(req)
    if len(free) < n:
        return None
    h = free.first_host(n)
    if h >= 0:
        return Allocation(gpus=free.host_free(h)[:n])
    g = free.first_group(n)
    if g >= 0:
        return Allocation(gpus=free.first_free(n, free.group_hosts[g]))
    return Allocation(gpus=free.first_free(n))
