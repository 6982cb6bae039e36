"""Invariants every communication policy must keep, and their checks (public as :mod:`commsched.testing`).

The invariants (networkx's maxflow tests are the model: one property checked across every
implementation of a family):

* **one class per job** — every running job gets exactly one class in ``0 .. priority_levels - 1``;
  nothing is decided for jobs that are not running; a ranking, when given, is a permutation;
* **valid routes** — every route index names one of the connection's equal-cost paths;
  routes pinned at placement are kept;
* **valid compression** — of two ranked jobs that share a network link, the higher-ranked one never
  gets a lower-priority class (crux-spec A14);
* **determinism** — the same state and context give equal decisions;
* **capacity** — simulated under the policy, no link carries more than its capacity and GPU
  utilisation stays within [0, 1].
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from commsched.scheduling.interfaces import PolicyBundle, PolicyContext, PolicyFn
from commsched.scheduling.state import ClusterState, Decisions, PlacedJob
from commsched.topology import NodeId, Topology
from commsched.workload import JobId, JobSpec, ModelProfile

__all__ = [
    "PolicyCheck",
    "check_capacity",
    "check_compression",
    "check_decisions",
    "check_determinism",
    "check_policy",
    "example_states",
    "toy_job",
]

#: capacity slack accepted for floating-point rounding of the rate allocation
_CAPACITY_SLACK = 1e-9


def toy_job(jid: str, *, compute_s: float, comm_bytes: float, gpus: int, overlap: float = 1.0) -> JobSpec:
    """A job with an explicit profile (no model zoo): ``compute_s`` per iteration, ``comm_bytes`` synced.

    Examples
    --------
    >>> j = toy_job("a", compute_s=2.0, comm_bytes=2e9, gpus=10)
    >>> (j.id, j.gpus, j.profile.compute_s, j.profile.sync_bytes)
    ('a', 10, 2.0, 2000000000.0)
    """
    prof = ModelProfile(
        name=jid, gpu="test", compute_s=compute_s, sync_bytes=comm_bytes, overlap=overlap, source="test"
    )
    return JobSpec(id=JobId(jid), profile=prof, gpus=gpus)


def _host_gpus(topo: Topology, hosts: Sequence[int], per_host: int = 8) -> tuple[NodeId, ...]:
    return tuple(g for h in hosts for g in topo.hosts[h].gpus[:per_host])


def example_states() -> tuple[ClusterState, ...]:
    """Small cluster states that exercise a policy: one link, contention on a Clos, few levels.

    1. Crux Example 1: two jobs on one 8 Gb/s link, 8 levels.
    2. Four 16-GPU jobs on a two-layer Clos (2 ToRs, 2 uplinks each), 3 levels.
    3. Six 16-GPU jobs on 3 ToRs, 2 levels (more contending jobs than classes).

    Examples
    --------
    >>> [(len(s.jobs), s.priority_levels) for s in example_states()]
    [(2, 8), (4, 3), (6, 2)]
    """
    from commsched.topology.builders import single_link, two_layer_clos

    one = ClusterState(
        topology=single_link(capacity_bps=8e9),
        jobs=(
            PlacedJob(spec=toy_job("a", compute_s=2.0, comm_bytes=2e9, gpus=10), gpus=()),
            PlacedJob(spec=toy_job("b", compute_s=1.0, comm_bytes=1e9, gpus=10), gpus=()),
        ),
        priority_levels=8,
    )
    clos = two_layer_clos(tors=2, aggs=2, hosts_per_tor=4, uplinks_per_tor=2)
    sizes = (("big", 0.4, 4e9), ("mid", 0.3, 2e9), ("low", 0.05, 3e9), ("tiny", 0.05, 2e9))
    four = ClusterState(
        topology=clos,
        jobs=tuple(
            PlacedJob(spec=toy_job(n, compute_s=c, comm_bytes=b, gpus=16), gpus=_host_gpus(clos, [k, k + 4]))
            for k, (n, c, b) in enumerate(sizes)
        ),
        priority_levels=3,
    )
    three = two_layer_clos(tors=3, aggs=2, hosts_per_tor=4, uplinks_per_tor=2)
    hosts = (0, 5, 1, 9, 2, 6, 3, 10, 4, 8, 7, 11)  # each job spans two ToRs
    six = ClusterState(
        topology=three,
        jobs=tuple(
            PlacedJob(
                spec=toy_job(f"j{k}", compute_s=0.1 + 0.07 * k, comm_bytes=(1 + (k * 7) % 5) * 1e9, gpus=16),
                gpus=_host_gpus(three, sorted(hosts[2 * k : 2 * k + 2])),
            )
            for k in range(6)
        ),
        priority_levels=2,
    )
    return (one, four, six)


def _path_count(state: ClusterState, key: object) -> int:
    from commsched.scheduling.routing import network_pair

    pair = network_pair(state.topology, key)  # type: ignore[arg-type]
    if pair is None:
        return 1
    return len(state.topology.equal_cost_paths(*pair))


def check_decisions(
    state: ClusterState, decisions: Decisions, *, unique_priorities: bool = False
) -> list[str]:
    """Problems of one decision: classes, ranking, routes and time shifts (empty list: none).

    ``unique_priorities`` accepts one class per job beyond the state's levels (the idealised
    hardware of Crux-PA and Crux-PS-PA, crux-spec §6.6).

    Examples
    --------
    >>> st = example_states()[0]
    >>> check_decisions(st, Decisions(classes={"a": 0, "b": 1}))
    []
    >>> check_decisions(st, Decisions(classes={"a": 0, "b": 9}))
    ["job 'b' has class 9, outside 0..7"]
    """
    returned: object = decisions  # a user's policy may return anything
    if not isinstance(returned, Decisions):
        return [f"the policy returned {type(returned).__name__}, not Decisions"]
    ids = {j.id for j in state.jobs}
    levels = max(state.priority_levels, len(ids)) if unique_priorities else state.priority_levels
    return [
        *_class_problems(decisions, ids, levels),
        *_rank_and_shift_problems(decisions, ids),
        *_route_problems(state, decisions, ids),
    ]


def _class_problems(decisions: Decisions, ids: set[JobId], levels: int) -> list[str]:
    out: list[str] = []
    for jid, cls in decisions.classes.items():
        if jid not in ids:
            out.append(f"class given to job {jid!r}, which is not running")
        elif not isinstance(cls, int) or not 0 <= cls < levels:
            out.append(f"job {jid!r} has class {cls}, outside 0..{levels - 1}")
    return out


def _rank_and_shift_problems(decisions: Decisions, ids: set[JobId]) -> list[str]:
    out: list[str] = []
    if decisions.ranking:
        if set(decisions.ranking) != ids:
            out.append("the ranking does not rank exactly the running jobs")
        elif sorted(decisions.ranking.values()) != list(range(len(ids))):
            out.append("the ranking is not a permutation of 0..n-1 (ranks must be unique)")
    for jid, shift in decisions.time_shift_s.items():
        if jid not in ids or not math.isfinite(shift) or shift < 0:
            out.append(f"time shift {shift} of job {jid!r} (expected a finite shift >= 0 of a running job)")
    return out


def _route_problems(state: ClusterState, decisions: Decisions, ids: set[JobId]) -> list[str]:
    out: list[str] = []
    for key, index in decisions.routes.items():
        if key.job not in ids:
            out.append(f"route given to a connection of job {key.job!r}, which is not running")
            continue
        n = _path_count(state, key)
        if not isinstance(index, int) or not 0 <= index < n:
            out.append(f"route {index} of {key.job}:{key.src}->{key.dst} is not one of its {n} paths")
    for job in state.jobs:
        for key, index in job.pinned_routes.items():
            if decisions.route_of(key) != index:
                out.append(f"pinned route of {key.job}:{key.src}->{key.dst} changed")
    return out


def check_compression(state: ClusterState, decisions: Decisions) -> list[str]:
    """Problems of the class compression: ranked jobs that contend must keep their order (A14), also
    where they share a link only through a step still in flight (``state.in_flight_links``).

    Examples
    --------
    >>> st = example_states()[0]  # the two jobs share the link
    >>> check_compression(st, Decisions(ranking={"a": 0, "b": 1}, classes={"a": 0, "b": 0}))
    []
    >>> check_compression(st, Decisions(ranking={"a": 0, "b": 1}, classes={"a": 1, "b": 0}))
    ["'a' ranks above 'b' and shares a link with it but gets class 1 > 0"]
    """
    from commsched.scheduling.policies import contention_matrix
    from commsched.scheduling.priority import job_facts, network_link_mask

    if not decisions.ranking or set(decisions.ranking) != {j.id for j in state.jobs}:
        return []
    topo = state.topology
    network = network_link_mask(topo)
    facts = [job_facts(topo, j, decisions.routes, network) for j in state.jobs]
    share = contention_matrix(topo, facts, network, state.in_flight_links)
    out = []
    jobs = state.jobs
    for a, b in itertools.combinations(range(len(jobs)), 2):
        if not share[a, b]:
            continue
        ja, jb = jobs[a].id, jobs[b].id
        hi, lo = (ja, jb) if decisions.ranking[ja] < decisions.ranking[jb] else (jb, ja)
        if decisions.class_of(hi) > decisions.class_of(lo):
            out.append(
                f"{hi!r} ranks above {lo!r} and shares a link with it but gets class "
                f"{decisions.class_of(hi)} > {decisions.class_of(lo)}"
            )
    return out


def check_determinism(policy: PolicyFn, state: ClusterState, ctx: PolicyContext) -> list[str]:
    """Problems of reproducibility: two calls with the same state and context must decide alike.

    Examples
    --------
    >>> import random
    >>> st, ctx = example_states()[0], PolicyContext(seed=0, now_s=0.0, epoch=0)
    >>> check_determinism(lambda s, c: Decisions(classes={"a": 0, "b": 1}), st, ctx)
    []
    >>> coin = random.Random(1)
    >>> check_determinism(lambda s, c: Decisions(classes={"a": coin.randrange(8)}), st, ctx)
    ['two calls with the same state and context (seed 0, epoch 0) decided differently']
    """
    first, second = policy(state, ctx), policy(state, ctx)
    if first != second:
        return [
            f"two calls with the same state and context (seed {ctx.seed}, epoch {ctx.epoch}) "
            "decided differently"
        ]
    return []


def check_capacity(
    policy: PolicyFn, state: ClusterState, *, horizon_s: float = 20.0, seed: int = 0
) -> list[str]:
    """Problems found simulating the state's jobs under the policy: link load above capacity, GPU
    utilisation outside [0, 1].

    Examples
    --------
    >>> from commsched.scheduling.basic import fair_policy
    >>> check_capacity(fair_policy, example_states()[0], horizon_s=10.0)
    []
    """
    from commsched.scheduling.placement import pack
    from commsched.sim.engine import SimJob, Simulation
    from commsched.sim.results.records import Mode, SimConfig

    sim = Simulation(
        topology=state.topology,
        jobs=[SimJob(spec=j.spec, gpus=j.gpus) for j in state.jobs],
        policy=policy,
        placement=pack,
        config=SimConfig(horizon_s=horizon_s, mode=Mode.EXACT, seed=seed),
        priority_levels=state.priority_levels,
    )
    res = sim.run()
    out = []
    util = res.series.link_utilization
    if util.size and float(util.max(initial=0.0)) > 1.0 + _CAPACITY_SLACK:
        out.append(f"a link carried {float(util.max()):.6f} of its capacity")
    for name, u in (("GPU", res.gpu_utilization), ("allocated GPU", res.allocated_gpu_utilization)):
        if not 0.0 <= u <= 1.0 + _CAPACITY_SLACK:
            out.append(f"{name} utilisation {u} outside [0, 1]")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyCheck:
    """The outcome of :func:`check_policy`: how many states and seeds were checked, and every problem."""

    policy: str
    states: int
    seeds: tuple[int, ...]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """No invariant broken."""
        return not self.problems


def check_policy(
    policy: PolicyFn | PolicyBundle | str,
    states: Sequence[ClusterState] | None = None,
    *,
    seeds: Sequence[int] = (0, 1),
    simulate: bool = True,
    unique_priorities: bool = False,
    raise_on_failure: bool = True,
) -> PolicyCheck:
    """Check a communication policy against every invariant on a set of cluster states.

    Parameters
    ----------
    policy
        A callable ``(ClusterState, PolicyContext) -> Decisions``, a ``PolicyBundle`` or a policy name.
    states
        The states to decide on; default :func:`example_states`.
    seeds
        Seeds of the :class:`~commsched.scheduling.interfaces.PolicyContext` (epoch 0 and 1 each).
    simulate
        Also run the capacity check (a short simulation per state).
    unique_priorities
        The policy gives every job its own class, beyond the state's levels (Crux-PA, Crux-PS-PA).
    raise_on_failure
        Raise ``AssertionError`` listing every problem (for tests); else return them.

    Examples
    --------
    >>> check_policy("crux-full").ok
    True
    >>> def everyone_class_9(state, ctx):
    ...     return Decisions(classes={j.id: 9 for j in state.jobs})
    >>> rep = check_policy(everyone_class_9, simulate=False, raise_on_failure=False)
    >>> rep.ok, rep.problems[0]
    (False, "state 0, seed 0, epoch 0: job 'a' has class 9, outside 0..7")
    """
    from commsched.catalog import as_bundle, policy_registry

    bundle = policy_registry().get(policy, where="policy") if isinstance(policy, str) else as_bundle(policy)
    fn: Callable[[ClusterState, PolicyContext], Decisions] = bundle.communication
    problems: list[str] = []
    chosen = tuple(example_states() if states is None else states)
    for i, st in enumerate(chosen):
        for seed in seeds:
            for epoch in (0, 1):
                ctx = PolicyContext(seed=seed, now_s=0.0, epoch=epoch)
                where = f"state {i}, seed {seed}, epoch {epoch}: "
                try:
                    d = fn(st, ctx)
                except Exception as exc:
                    problems.append(where + f"raised {type(exc).__name__}: {exc}")
                    continue
                found = check_decisions(st, d, unique_priorities=unique_priorities)
                if not found:
                    found = check_compression(st, d) + check_determinism(fn, st, ctx)
                problems.extend(where + p for p in found)
        if simulate and not problems:
            problems.extend(
                f"state {i}, simulated: {p}" for p in check_capacity(fn, st, seed=seeds[0] if seeds else 0)
            )
    report = PolicyCheck(policy=bundle.name, states=len(chosen), seeds=tuple(seeds), problems=tuple(problems))
    if raise_on_failure and problems:
        raise AssertionError(
            f"policy {bundle.name!r} breaks {len(problems)} invariant(s):\n" + "\n".join(problems)
        )
    return report
