"""``simulate`` and ``compare``: run a scenario under named or custom policies.

A policy may be given as a name (built in, from an installed package's entry point, or registered in
this process with :func:`commsched.register_policy`), as a plain callable
``(ClusterState, PolicyContext) -> Decisions``, or as a :class:`~commsched.scheduling.interfaces.PolicyBundle`
(a communication policy with its own placement, queue order or cluster change). Placements likewise:
a name or a callable ``(PlacementRequest) -> Allocation | None``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from commsched.catalog import as_bundle, placement_registry, policy_registry
from commsched.errors import InputError
from commsched.io.scenario import Scenario
from commsched.scheduling.interfaces import PlacementFn, PolicyBundle, PolicyFn
from commsched.sim.results.comparison import Comparison, summarise_policy
from commsched.sim.results.records import Mode, SimResult

__all__ = [
    "PlacementLike",
    "PolicyLike",
    "compare",
    "prepare_run",
    "resolve_policy",
    "simulate",
]

#: what ``policy=`` accepts: a name, a communication policy, or a bundle
PolicyLike = str | PolicyFn | PolicyBundle
#: what ``placement=`` accepts: a name or a placement function
PlacementLike = str | PlacementFn


def resolve_policy(policy: PolicyLike, *, where: str = "policy") -> PolicyBundle:
    """The :class:`~commsched.scheduling.interfaces.PolicyBundle` behind a name, callable or bundle.

    Examples
    --------
    >>> resolve_policy("crux-full").name
    'crux-full'
    >>> from commsched.scheduling.state import Decisions
    >>> def one_class(state, ctx):
    ...     return Decisions()
    >>> resolve_policy(one_class).name
    'one_class'
    >>> resolve_policy("no-such-policy")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    commsched.errors.UnknownNameError: policy: unknown policy 'no-such-policy' (expected one of ...)
    """
    if isinstance(policy, str):
        return policy_registry().get(policy, where=where)
    return as_bundle(policy)


def _placement_fn(placement: PlacementLike, *, where: str) -> PlacementFn:
    if isinstance(placement, str):
        return placement_registry().get(placement, where=where)
    if not callable(placement):
        raise InputError(
            f"{type(placement).__name__} is not a placement",
            where=where,
            expected="a placement name or a callable (PlacementRequest) -> Allocation | None",
        )
    return placement


def _mode(mode: str | Mode | None, scenario: Scenario) -> Mode:
    value = scenario.mode if mode is None else str(mode)
    if value not in ("exact", "fast"):
        raise InputError(f"unknown mode {value!r}", where="mode", expected="exact or fast")
    return Mode(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    """One simulation to run: everything resolved, picklable for worker processes."""

    scenario: Scenario
    bundle: PolicyBundle
    placement: PlacementFn
    mode: Mode
    seed: int
    #: the job scheduler the jobs' ideal iterations are placed by (never a bundle's own placement)
    job_scheduler: PlacementFn | None = None


def prepare_run(
    scenario: Scenario,
    policy: PolicyLike | None,
    placement: PlacementLike | None,
    mode: str | None,
    seed: int | None,
) -> _Run:
    bundle = resolve_policy(scenario.policy if policy is None else policy)
    job_scheduler = _placement_fn(scenario.placement if placement is None else placement, where="placement")
    return _Run(
        scenario=scenario,
        bundle=bundle,
        placement=bundle.placement if bundle.placement is not None else job_scheduler,
        job_scheduler=job_scheduler,
        mode=_mode(mode, scenario),
        seed=scenario.seed if seed is None else seed,
    )


def _execute(run: _Run, progress: Callable[[float], None] | None = None) -> SimResult:
    from commsched.api.runner import run_bundle

    return run_bundle(
        run.scenario,
        run.bundle,
        placement=run.placement,
        mode=run.mode,
        seed=run.seed,
        progress=progress,
        job_scheduler=run.job_scheduler,
    )


def simulate(
    scenario: Scenario | str | Path,
    policy: PolicyLike | None = None,
    *,
    placement: PlacementLike | None = None,
    mode: str | None = None,
    seed: int | None = None,
    progress: Callable[[float], None] | None = None,
) -> SimResult:
    """Simulate a scenario under one policy and measure GPU utilisation, JCT and link load.

    Parameters
    ----------
    scenario
        A loaded scenario, or what :func:`~commsched.api.load_scenario` accepts (file or shipped name).
    policy
        A policy name, a communication policy ``(ClusterState, PolicyContext) -> Decisions``, or a
        ``PolicyBundle``; default: the scenario's ``policy``.
    placement
        A placement name or a ``(PlacementRequest) -> Allocation | None`` function for the jobs
        without an explicit placement; default: the scenario's (a bundle's own placement wins).
    mode
        ``"exact"`` (every iteration) or ``"fast"`` (steady states extrapolated); default: the scenario's.
    seed
        Seed of the run; default: the scenario's. Same inputs and seed give the same result.
    progress
        Called with the simulated time as the run advances.

    Returns
    -------
    SimResult
        ``gpu_utilization``, ``allocated_gpu_utilization``, per-job ``jobs`` and time ``series``; the
        same figures as ``commsched simulate SCENARIO --json``.

    Examples
    --------
    >>> r = simulate("crux-fig19", policy="crux-full")
    >>> r.policy, r.cluster_gpus, 0 < r.gpu_utilization <= 1
    ('crux-full', 96, True)

    A custom policy is a plain function over the cluster state:

    >>> from commsched.scheduling.state import Decisions
    >>> def bert_first(state, ctx):
    ...     '''The BERT jobs in class 0, every other job in class 1.'''
    ...     return Decisions(classes={j.id: 0 if "bert" in j.id else 1 for j in state.jobs})
    >>> simulate("crux-fig19", policy=bert_first, mode="fast").policy
    'bert_first'
    """
    from commsched.api.scenarios import load_scenario

    run = prepare_run(load_scenario(scenario), policy, placement, mode, seed)
    return _execute(run, progress)


def _all_named(policies: Sequence[PolicyLike], placement: PlacementLike | None) -> bool:
    """Whether every policy and the placement are names that any process resolves alike (not names
    registered in this process only, which worker processes would not know)."""
    from commsched.catalog import registered_in_process

    ok = all(isinstance(p, str) and not registered_in_process(p, family="policy") for p in policies)
    return ok and (
        placement is None
        or (isinstance(placement, str) and not registered_in_process(placement, family="placement"))
    )


def compare(
    scenario: Scenario | str | Path,
    policies: Sequence[PolicyLike],
    *,
    placement: PlacementLike | None = None,
    mode: str | None = None,
    workers: int = 1,
    ray: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Comparison:
    """Replay a scenario once per policy, on the same cluster and jobs, and compare them.

    Parameters
    ----------
    scenario
        A loaded scenario, or a file or shipped name.
    policies
        Names, callables or bundles, in the order the comparison reports them; names must be distinct.
    placement
        Placement (job scheduler) for every policy that has none of its own; default: the scenario's.
    mode
        ``"exact"`` or ``"fast"``; default: the scenario's.
    workers
        Local processes running policies in parallel (joblib).
    ray
        Address of a Ray cluster (``"local"`` starts one) to spread the policies over.
    progress
        Called with each policy's name as its run finishes.

    Returns
    -------
    Comparison
        ``summaries`` (GPU utilisation, average JCT/JRT/JWT, worst throughput loss per policy) and the
        full ``results``, in the order asked.

    Examples
    --------
    >>> cmp = compare("crux-fig19", ["ecmp-fair", "crux-full"], mode="fast")
    >>> [s.policy for s in cmp.summaries]
    ['ecmp-fair', 'crux-full']
    >>> cmp.summaries[1].gpu_utilization >= cmp.summaries[0].gpu_utilization
    True
    """
    from commsched.api.scenarios import load_scenario

    sc = load_scenario(scenario)
    if workers < 1:
        raise InputError(f"{workers} workers", where="workers", expected="at least 1")
    if _all_named(policies, placement):
        # names resolve in any process: they are spread over joblib or Ray workers
        from commsched.api.comparing import compare_named

        names = [str(p) for p in policies]
        job_scheduler = placement if isinstance(placement, str) else None
        return compare_named(
            sc,
            names,
            job_scheduler=job_scheduler,
            mode=mode,
            workers=workers,
            ray_address=ray,
            progress=progress,
        )
    runs = _custom_runs(sc, policies, placement, mode)
    results = _run_all(runs, workers=workers, ray=ray)
    if progress is not None:
        for r in results:
            progress(r.policy)
    return Comparison(
        scenario=sc.name, summaries=tuple(summarise_policy(r) for r in results), results=tuple(results)
    )


def _custom_runs(
    sc: Scenario, policies: Sequence[PolicyLike], placement: PlacementLike | None, mode: str | None
) -> list[_Run]:
    if not policies:
        raise InputError("no policy given", where="policies", expected="a list of policies")
    runs = [prepare_run(sc, p, placement, mode, None) for p in policies]
    names = [r.bundle.name for r in runs]
    if len(set(names)) != len(names):
        raise InputError("a policy name is listed twice", where="policies", expected="distinct names")
    return runs


def _run_all(runs: list[_Run], *, workers: int, ray: str | None) -> list[SimResult]:
    if ray is not None:
        try:
            import ray as ray_mod
        except ImportError:
            raise InputError(
                "Ray is not installed", where="ray", expected="pip install 'commsched[ray]' or ray=None"
            ) from None
        ray_mod.init(address=None if ray == "local" else ray, ignore_reinit_error=True, log_to_driver=False)
        remote = ray_mod.remote(_execute)
        return list(ray_mod.get([remote.remote(r) for r in runs]))
    if workers > 1 and len(runs) > 1:
        from joblib import Parallel, delayed

        return list(Parallel(n_jobs=min(workers, len(runs)))(delayed(_execute)(r) for r in runs))
    return [_execute(r) for r in runs]
