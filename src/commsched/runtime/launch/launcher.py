"""A testbed run from ``up`` to ``down``: the testbed built and tuned, each policy's plan launched on it.

:func:`launched` builds the testbed of a run (ECMP routing), tunes it for real jobs and yields a
:class:`Launcher`; on exit, also after a failure, it tears the testbed down with
:func:`.teardown.tear_down`, as ``commsched testbed down`` does. The caller turns each policy into a
:class:`LaunchPlan` (where its jobs run, which OCS circuits it asks for); :meth:`Launcher.launch`
rewires the circuits, shapes the intra-host hops, probes the paths (once per placement and circuits)
and runs the daemon, the agents and the jobs (:func:`.session.run_policy`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from commsched.runtime.launch.fabric import (
    Circuits,
    IntraHostJSON,
    ProbedJSON,
    probe_table,
    set_circuits,
    shape_intra_host,
    tune,
)
from commsched.runtime.launch.jobs import CommandJob, JobLayout
from commsched.runtime.launch.session import PolicyRun, run_policy
from commsched.runtime.launch.settings import RunSettings
from commsched.runtime.launch.teardown import tear_down
from commsched.testbed.handle import Testbed
from commsched.topology import Topology

__all__ = ["LaunchPlan", "Launched", "Launcher", "launched"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchPlan:
    """One policy's jobs where its placement put them, and the OCS circuits it asks for."""

    policy: str
    #: the library's jobs (one job process per host) and the command jobs (unmodified programs)
    jobs: tuple[JobLayout, ...]
    commands: tuple[CommandJob, ...] = ()
    #: ``circuits[leaf][uplink] = spine`` the placement asks for (``None``: the static circuits)
    circuits: Circuits | None = None
    #: the topology's static circuits (``None``: no OCS layer)
    static_circuits: Circuits | None = None
    #: job -> its GPUs (the probe table is made once per placement and circuits)
    placement: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Launched:
    """What one policy's launch measured, on the testbed as it ran (rewired where the plan asked)."""

    testbed: Testbed
    run: PolicyRun
    #: the intra-host hops shaped (:func:`.fabric.shape_intra_host`)
    intra: IntraHostJSON
    #: the probe table's counts (:func:`.fabric.probe_table`)
    probe: ProbedJSON


class Launcher:
    """The testbed of one run, shared by its policies (use :func:`launched`)."""

    def __init__(self, testbed: Testbed, settings: RunSettings, *, work: Path, tuned: dict[str, int]) -> None:
        self.testbed = testbed
        self.settings = settings
        self.work = work
        #: what :func:`.fabric.tune` changed (for the report)
        self.tuned = tuned
        self._tables: dict[tuple[Any, ...], tuple[Path, ProbedJSON]] = {}

    def launch(self, plan: LaunchPlan) -> Launched:
        """Rewire, shape, probe, run ``plan``'s jobs for the profiling and measuring windows; stop them."""
        tb = set_circuits(self.testbed, plan.circuits, static=plan.static_circuits)
        self.testbed = tb
        jobs = list(plan.jobs)
        intra = shape_intra_host(tb, jobs)
        key = (plan.placement, plan.circuits)
        if key not in self._tables:
            table = self.work / f"ports-{len(self._tables)}.json"
            self.settings.options.say(f"probing the paths of {len(jobs)} library jobs' connections")
            self._tables[key] = (table, probe_table(tb, jobs, table))
        table, probed = self._tables[key]
        spec = self.settings.topology
        if plan.circuits is not None:
            spec = {**spec, "circuits": [list(r) for r in plan.circuits]}
        run = run_policy(
            tb,
            jobs,
            plan.policy,
            replace(self.settings, topology=spec),
            work=self.work / plan.policy,
            table=table,
            commands=list(plan.commands),
        )
        return Launched(testbed=tb, run=run, intra=intra, probe=probed)


@contextmanager
def launched(topology: Topology, settings: RunSettings, *, work: Path) -> Iterator[Launcher]:
    """Build and tune testbed ``settings.options.name`` for ``topology``; tear it down on exit."""
    from commsched.testbed import build

    opts = settings.options
    opts.say(f"building testbed {opts.name} ({topology.name}, rate scale {opts.rate_scale:g})")
    state = build.up(topology, name=opts.name, rate_scale=opts.rate_scale, routing="ecmp", seed=settings.seed)
    try:
        tb = Testbed(state)
        yield Launcher(tb, settings, work=work, tuned=tune(tb, opts))
    finally:
        opts.say(f"tearing down testbed {opts.name}")
        tear_down(opts.name)
