"""A typed host view for the tests that drive the enforcer's loops by hand (what the follower hands the
enforcer: :class:`commsched.runtime.protocol.control.HostView`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from commsched.runtime.protocol.control import Connection, HostView, JobDecision
from commsched.runtime.protocol.marks import mark_for_class


def host_view(
    host: str,
    shares: Sequence[tuple[str, float]],
    jobs: Mapping[str, tuple[Sequence[str], Sequence[str]]] | None = None,
) -> HostView:
    """``host``'s view: one connection leaving it per ``(job, share)``, and per job its GPUs and hosts."""
    conns = tuple(
        Connection(
            job=job,
            src_rank=0,
            dst_rank=1,
            src=f"{host}/gpu0",
            dst="peer/gpu0",
            src_nic=f"{host}/nic0",
            dst_nic="peer/nic0",
            path_index=0,
            n_paths=1,
            path=(),
            links=(),
            src_port=None,
            share=share,
        )
        for job, share in shares
    )
    decided = {
        j: JobDecision(
            rank=0,
            priority_class=0,
            mark=mark_for_class(0),
            profiling=True,
            gpus=tuple(g),
            hosts=tuple(h),
            compute_s=0.0,
            comm_bytes=0.0,
        )
        for j, (g, h) in (jobs or {}).items()
    }
    return HostView(version=1, policy="test", host=host, jobs=MappingProxyType(decided), connections=conns)
