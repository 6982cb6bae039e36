"""An example commsched plug-in: the "shortest job's traffic first" communication policy.

Installed (``pip install -e tests/api/pkg_mypolicy``), it is the policy ``mypkg:mine`` everywhere
commsched takes a policy name: ``commsched compare SCENARIO --policies crux-full,mypkg:mine``.
"""

from __future__ import annotations

from commsched import ClusterState, Decisions, PolicyContext
from commsched.scheduling import ecmp_routes


def mine(state: ClusterState, ctx: PolicyContext) -> Decisions:
    """Shortest job's traffic first: the job that synchronises the fewest bytes per iteration gets
    the highest priority; the lowest classes are shared by the rest; ECMP routes."""
    order = sorted(state.jobs, key=lambda j: (j.spec.profile.sync_bytes, str(j.id)))
    ranking = {j.id: rank for rank, j in enumerate(order)}
    last = state.priority_levels - 1
    return Decisions(
        routes=ecmp_routes(state, seed=ctx.seed),
        ranking=ranking,
        classes={jid: min(rank, last) for jid, rank in ranking.items()},
    )
