"""commsched: communication scheduling for multi-tenant GPU training clusters.

The public API fits on a page (``import commsched as cs``):

* scenarios — :func:`load_scenario` (a file or a shipped name), :func:`build_scenario` (from objects),
  :func:`load_profile` (a zoo model or your own profile from ``commsched profile``);
* running — :func:`simulate`, :func:`compare`, :func:`plan` with a policy given by name, as a plain
  function ``(ClusterState, PolicyContext) -> Decisions`` or as a :class:`PolicyBundle`;
* your own names — :func:`register_policy`, :func:`register_placement`, or the ``commsched.policies``
  entry-point group of an installed package; :mod:`commsched.testing` checks a policy's invariants;
* records — :class:`Scenario`, :class:`ClusterState`, :class:`Decisions`, :class:`SimResult`,
  :class:`JobResult`, :class:`Comparison`, :class:`PlanReport`, ...;
* LLM jobs — :class:`ParallelSpec`, :func:`grouped_job`, :func:`job_from_aicb` (TP/PP/DP/EP groups);
* analysis — :func:`result_frames`, :func:`comparison_frame`, :func:`read_result`,
  :func:`read_comparison` (pandas DataFrames; extra ``pandas``).

Layers (lower never import higher): ``topology`` and ``workload`` at the bottom, ``scheduling`` (pure
decisions) above them, ``sim`` and ``intrajob`` on top of that, and the edges (``cli``, ``io``,
``experiments``, ``api``) above everything. The names above are loaded on first use, so that
``import commsched`` stays cheap.

Examples
--------
>>> import commsched as cs
>>> r = cs.simulate(cs.load_scenario("crux-fig19"), policy="crux-full")
>>> 0.0 < r.gpu_utilization <= 1.0
True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from commsched._version import __version__

# public name -> module that defines it (imported on first access, PEP 562)
_EXPORTS: dict[str, str] = {
    # functions of the API
    "load_scenario": "commsched.api.scenarios",
    "build_scenario": "commsched.api.scenarios",
    "load_profile": "commsched.api.scenarios",
    "simulate": "commsched.api.running",
    "compare": "commsched.api.running",
    "resolve_policy": "commsched.api.running",
    "plan": "commsched.api.planning",
    "plan_json": "commsched.api.planning",
    "result_frames": "commsched.api.frames",
    "read_result": "commsched.api.frames",
    "comparison_frame": "commsched.api.frames",
    "read_comparison": "commsched.api.frames",
    # names of policies
    "register_policy": "commsched.catalog",
    "unregister_policy": "commsched.catalog",
    "register_placement": "commsched.catalog",
    "unregister_placement": "commsched.catalog",
    "policy_names": "commsched.catalog",
    "placement_names": "commsched.catalog",
    # records
    "Scenario": "commsched.io.scenario",
    "ScenarioJob": "commsched.io.scenario",
    "ClusterState": "commsched.scheduling.state",
    "PlacedJob": "commsched.scheduling.state",
    "ConnectionKey": "commsched.scheduling.state",
    "Decisions": "commsched.scheduling.state",
    "PolicyContext": "commsched.scheduling.interfaces",
    "PolicyBundle": "commsched.scheduling.interfaces",
    "PlacementRequest": "commsched.scheduling.interfaces",
    "Allocation": "commsched.scheduling.interfaces",
    "SimResult": "commsched.sim.results.records",
    "JobResult": "commsched.sim.results.records",
    "TimeSeries": "commsched.sim.results.records",
    "Comparison": "commsched.sim.results.comparison",
    "PolicySummary": "commsched.sim.results.comparison",
    "PlanReport": "commsched.api.planning",
    "ResultFrames": "commsched.api.frames",
    "Topology": "commsched.topology",
    "JobSpec": "commsched.workload",
    "ModelProfile": "commsched.workload",
    # jobs with tensor/pipeline/data/expert parallel groups (docs/llm-jobs.md)
    "ParallelSpec": "commsched.workload.parallel",
    "grouped_job": "commsched.workload.grouped_jobs",
    "job_from_aicb": "commsched.workload.grouped_jobs",
    # errors
    "CommschedError": "commsched.errors",
    "InputError": "commsched.errors",
    "ValidationError": "commsched.errors",
    "UnknownNameError": "commsched.errors",
}

__all__ = [
    "Allocation",
    "ClusterState",
    "CommschedError",
    "Comparison",
    "ConnectionKey",
    "Decisions",
    "InputError",
    "JobResult",
    "JobSpec",
    "ModelProfile",
    "ParallelSpec",
    "PlacedJob",
    "PlacementRequest",
    "PlanReport",
    "PolicyBundle",
    "PolicyContext",
    "PolicySummary",
    "ResultFrames",
    "Scenario",
    "ScenarioJob",
    "SimResult",
    "TimeSeries",
    "Topology",
    "UnknownNameError",
    "ValidationError",
    "__version__",
    "build_scenario",
    "compare",
    "comparison_frame",
    "grouped_job",
    "job_from_aicb",
    "load_profile",
    "load_scenario",
    "placement_names",
    "plan",
    "plan_json",
    "policy_names",
    "read_comparison",
    "read_result",
    "register_placement",
    "register_policy",
    "resolve_policy",
    "result_frames",
    "simulate",
    "unregister_placement",
    "unregister_policy",
]

if TYPE_CHECKING:
    from commsched.api.frames import (
        ResultFrames,
        comparison_frame,
        read_comparison,
        read_result,
        result_frames,
    )
    from commsched.api.planning import PlanReport, plan, plan_json
    from commsched.api.running import compare, resolve_policy, simulate
    from commsched.api.scenarios import build_scenario, load_profile, load_scenario
    from commsched.catalog import (
        placement_names,
        policy_names,
        register_placement,
        register_policy,
        unregister_placement,
        unregister_policy,
    )
    from commsched.errors import CommschedError, InputError, UnknownNameError, ValidationError
    from commsched.io.scenario import Scenario, ScenarioJob
    from commsched.scheduling.interfaces import Allocation, PlacementRequest, PolicyBundle, PolicyContext
    from commsched.scheduling.state import ClusterState, ConnectionKey, Decisions, PlacedJob
    from commsched.sim.results.comparison import Comparison, PolicySummary
    from commsched.sim.results.records import JobResult, SimResult, TimeSeries
    from commsched.topology import Topology
    from commsched.workload import JobSpec, ModelProfile
    from commsched.workload.grouped_jobs import grouped_job, job_from_aicb
    from commsched.workload.parallel import ParallelSpec


#: subpackages reachable as attributes without an explicit import (``cs.testing.check_policy``)
_SUBMODULES = frozenset({"api", "testing", "topology", "workload", "scheduling", "sim", "io", "experiments"})


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"commsched.{name}")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'commsched' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | _SUBMODULES)
