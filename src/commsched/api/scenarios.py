"""Scenarios for the Python API: load one from a file or a shipped name, or build one from objects."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from commsched.errors import InputError
from commsched.io.scenario import Scenario, ScenarioJob
from commsched.topology import NodeId, Topology
from commsched.workload import JobSpec, ModelProfile

__all__ = ["build_scenario", "load_profile", "load_scenario"]


def load_profile(name_or_path: str | Path) -> ModelProfile:
    """A model profile: a zoo name (``resnet50``, ``resnet50@h200-bf16``) or a profile file.

    A profile file is the JSON that ``commsched profile`` writes (``--out``); the profile can then be given
    to :func:`commsched.workload.job_from_model` or to a :class:`~commsched.workload.JobSpec`, as a
    scenario file gives it with ``model: {profile: FILE}``.

    Raises
    ------
    commsched.errors.InputError
        No such zoo model, or a file that is missing or not a profile.

    Examples
    --------
    >>> p = load_profile("resnet50@h200-bf16")
    >>> (p.gpu, p.precision, round(p.compute_s, 4))
    ('NVIDIA H200', 'bf16', 0.0545)
    """
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or text.endswith(".json"):
        from commsched.workload.profiling import read_profile_document

        return read_profile_document(text)
    from commsched.workload.zoo import get_model

    return get_model(text)


def load_scenario(path_or_name: str | Path | Scenario) -> Scenario:
    """Load and validate a scenario file, or a scenario shipped with commsched by name.

    Parameters
    ----------
    path_or_name
        A YAML file (``.yaml``/``.yml`` or any existing path), the name of a shipped scenario (see
        ``commsched scenarios``), or an already loaded :class:`~commsched.io.scenario.Scenario`
        (returned unchanged).

    Returns
    -------
    Scenario
        The validated scenario: topology, jobs, policy, placement, horizon, seed, mode.

    Raises
    ------
    commsched.errors.ValidationError
        The file has problems; ``problems`` lists every one with its line and field.
    commsched.errors.InputError
        No such file and no shipped scenario of that name.

    Examples
    --------
    >>> sc = load_scenario("crux-fig19")
    >>> (sc.name, sc.topology.n_gpus, len(sc.jobs))
    ('crux-fig19', 96, 4)
    >>> load_scenario(sc) is sc
    True
    """
    if isinstance(path_or_name, Scenario):
        return path_or_name
    from commsched.io.shipped import resolve_scenario

    return resolve_scenario(str(path_or_name))


def build_scenario(
    topology: Topology,
    jobs: Sequence[JobSpec | ScenarioJob],
    *,
    horizon_s: float,
    name: str = "custom",
    **settings: object,
) -> Scenario:
    """A scenario built from Python objects instead of a file.

    Parameters
    ----------
    topology
        The cluster, e.g. from :func:`commsched.topology.two_layer_clos`.
    jobs
        Jobs placed by the scenario's placement policy (:class:`~commsched.workload.JobSpec`), or with
        an explicit placement (:class:`~commsched.io.scenario.ScenarioJob` with ``gpu_ids``).
    horizon_s
        Simulated time after which every job still running stops, seconds.
    name
        Reported in comparisons.
    **settings
        Any other field of :class:`~commsched.io.scenario.Scenario`: ``policy`` (default ``"static"``),
        ``placement`` (``"pack"``), ``queue`` (``"fifo"``), ``backfill`` (``False``), ``priority_levels``
        (8), ``warmup_s`` (0), ``seed`` (0), ``mode`` (``"exact"``).

    Examples
    --------
    >>> from commsched.topology import single_link
    >>> from commsched.workload import JobId, JobSpec, ModelProfile
    >>> prof = ModelProfile(name="toy", gpu="any", compute_s=1.0, sync_bytes=1e9, overlap=1.0, source="doc")
    >>> sc = build_scenario(single_link(capacity_bps=8e9), [JobSpec(id=JobId("a"), profile=prof, gpus=4)],
    ...                     horizon_s=10.0, policy="fair")
    >>> (sc.name, sc.policy, sc.jobs[0].spec.id, sc.horizon_s)
    ('custom', 'fair', 'a', 10.0)

    Jobs from a trace (a file loader or the synthetic generator of :mod:`commsched.workload.traces`):

    >>> from commsched.topology import two_layer_clos
    >>> from commsched.workload.traces import SyntheticParams, synthetic_trace, to_job_specs
    >>> topo = two_layer_clos(tors=2, aggs=2)
    >>> trace = synthetic_trace(SyntheticParams(jobs=20, days=0.05, cluster_gpus=topo.n_gpus, seed=1))
    >>> sc = build_scenario(topo, to_job_specs(trace), horizon_s=3600.0, policy="crux-full", mode="fast")
    >>> len(sc.jobs), sc.placement
    (20, 'pack')
    """
    defaults: dict[str, object] = {
        "priority_levels": 8,
        "policy": "static",
        "placement": "pack",
        "queue": "fifo",
        "backfill": False,
        "warmup_s": 0.0,
        "seed": 0,
        "mode": "exact",
    }
    unknown = sorted(set(settings) - set(defaults))
    if unknown:
        raise InputError(
            f"unknown scenario setting(s) {', '.join(unknown)}",
            where="build_scenario",
            expected="one of " + ", ".join(sorted(defaults)),
        )
    if not horizon_s > 0:
        raise InputError(f"horizon_s = {horizon_s}", where="build_scenario", expected="a positive number")
    entries: list[ScenarioJob] = []
    for j in jobs:
        if isinstance(j, ScenarioJob):
            entries.append(j)
        elif isinstance(j, JobSpec):
            gpu_ids = tuple(NodeId(g) for g in j.gpu_ids)
            entries.append(ScenarioJob(spec=j, gpu_ids=gpu_ids))
        else:
            raise InputError(
                f"{type(j).__name__} is not a job", where="build_scenario", expected="JobSpec or ScenarioJob"
            )
    values = {**defaults, **settings}
    return Scenario(
        name=name,
        source=f"<{name}>",
        topology=topology,
        jobs=tuple(entries),
        horizon_s=float(horizon_s),
        **values,  # type: ignore[arg-type]
    )
