"""Job schedulers (placement policies) to compose with communication scheduling: pack, HiveD-like, Muri-like.

Each is a :data:`~commsched.scheduling.interfaces.PlacementFn`; :func:`job_schedulers` lists them by name
(the edges register them). Returning ``None`` means "does not fit now": the simulator queues the job FIFO.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §6.4 (Crux composed with HiveD and Muri).
"""

from __future__ import annotations

from commsched.scheduling.interfaces import PlacementFn
from commsched.scheduling.jobsched.firstfit import first_fit
from commsched.scheduling.jobsched.hived import hived
from commsched.scheduling.jobsched.muri import REF_BPS, comm_share, muri
from commsched.scheduling.placement import pack


def job_schedulers() -> dict[str, PlacementFn]:
    """Name -> placement policy: ``first-fit`` (the trace's production scheduler), ``pack`` (best-fit
    locality packing), ``hived``, ``muri``.

    Examples
    --------
    >>> sorted(job_schedulers())
    ['first-fit', 'hived', 'muri', 'pack']
    """
    return {"first-fit": first_fit, "pack": pack, "hived": hived, "muri": muri}


__all__ = ["REF_BPS", "comm_share", "first_fit", "hived", "job_schedulers", "muri"]
