"""GPU intensity ``I_j = W_j / t_j`` of a placed job (Crux §3, Definition 2).

Units (the convention of the whole package, crux-spec §3.2 consistency check)
-----------------------------------------------------------------------------
* ``W_j`` is the job's compute per iteration in **GPU-seconds**: ``gpus x compute_s``. The paper
  uses FLOPs; with GPUs of one type FLOPs are proportional to GPU-seconds, and GPU-seconds need no
  FLOP count per model (Crux's Examples 1 and 2 have a constant FLOP rate per GPU-second).
* ``t_j = max_e M_{j,e} / B_e`` over **every** link the job's per-iteration traffic uses, intra-host
  links (PCIe, NVLink) included: its bottleneck-link transfer time without contention, in seconds.
* ``I_j`` is therefore dimensionless (GPU-seconds of compute unlocked per second of bottleneck-link
  time); 0 for a job without traffic.

A grouped job (TP/PP/DP/EP groups, :mod:`commsched.scheduling.groups`) takes ``t_j`` over the network
links only (access and fabric): its intensity is over all its inter-host traffic, every group kind
summed per link. Its TP traffic inside a host runs on NVLink at a rate no placement or priority changes;
counting it would make a TP-heavy job look communication-bound to the network scheduler (an
interpretation of Definition 2 for jobs with groups). Its ``W_j`` is its ranks' compute without the
pipeline bubble (``gpus x busy_s``, :attr:`~commsched.workload.records.JobSpec.busy_s`).

``t_j`` depends on the routes of the job's connections (two of its own flows hashed onto one uplink
double its load there). :func:`job_intensity` takes the routes to use; the Crux policies evaluate it
under the job's *solo* routes (its own connections spread by path selection on an empty network, what
profiling measures while the new job has the unique highest priority, Crux §5.4).

References
----------
.. [1] J. Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
   SIGCOMM 2024, §3 (Definition 2) and §5.4 (profiling); crux-spec §1.3 and §3.2.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from commsched.scheduling.state import ConnectionKey, PlacedJob
from commsched.scheduling.traffic import JobTraffic, job_traffic
from commsched.topology import Topology
from commsched.topology.records import NETWORK_LINK_KINDS

__all__ = ["Intensity", "intensity_from_traffic", "job_intensity"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Intensity:
    """A job's GPU intensity and its two factors.

    Attributes
    ----------
    work_gpu_s
        ``W_j``: GPU-seconds of compute per iteration (``gpus x compute_s``).
    bottleneck_s
        ``t_j``: the longest time its per-iteration traffic needs on one link, seconds.
    value
        ``I_j = W_j / t_j`` (0 when ``t_j`` is 0).
    """

    work_gpu_s: float
    bottleneck_s: float
    value: float


def intensity_from_traffic(topology: Topology, job: PlacedJob, traffic: JobTraffic) -> Intensity:
    """``I_j`` of a job from its projected per-iteration traffic.

    Examples
    --------
    Crux Example 1 on one 8 Gb/s link: 10 GPUs x 2 s of compute, 2 GB per iteration (2 s):

    >>> from commsched.topology.builders import single_link
    >>> from commsched.workload import JobId, JobSpec, ModelProfile
    >>> prof = ModelProfile(name="a", gpu="-", compute_s=2.0, sync_bytes=2e9, overlap=1.0, source="ex")
    >>> job = PlacedJob(spec=JobSpec(id=JobId("a"), profile=prof, gpus=10), gpus=())
    >>> topo = single_link(capacity_bps=8e9)
    >>> intensity_from_traffic(topo, job, job_traffic(topo, job))
    Intensity(work_gpu_s=20.0, bottleneck_s=2.0, value=10.0)

    References
    ----------
    Crux §3, Definition 2; crux-spec §1.3.
    """
    work = job.n_gpus * job.spec.busy_s  # GPU-seconds per iteration (a pipeline's bubble is not work)
    links = None
    if job.spec.parallel is not None and job.gpus:
        links = topology.links_of_kind(NETWORK_LINK_KINDS)  # inter-host traffic only
    t_j = traffic.bottleneck_time_s(topology.capacity_bps, links)  # bytes * 8 / bits-per-s inside
    return Intensity(work_gpu_s=work, bottleneck_s=t_j, value=work / t_j if t_j > 0 else 0.0)


def job_intensity(
    topology: Topology, job: PlacedJob, routes: Mapping[ConnectionKey, int] | None = None
) -> Intensity:
    """``I_j`` of a placed job whose connections take ``routes`` (default: path 0 of each).

    References
    ----------
    Crux §3, Definition 2; crux-spec §1.3.
    """
    return intensity_from_traffic(topology, job, job_traffic(topology, job, routes))
