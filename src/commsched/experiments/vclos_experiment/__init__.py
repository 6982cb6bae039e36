"""The large-scale experiments of vClos (Table 5, Figs. 12-13): Helios-like traces replayed per policy.

Trace
-----
The jobs come from the scenario's ``trace:`` section, of kind ``helios_like``
(:mod:`commsched.workload.traces.helios`: sizes from the Helios Venus summary, log-normal run times,
Poisson arrivals with mean gap lambda); the experiment overrides its ``mean_gap_s`` (``--lambda``),
``tasks``, ``seed`` and any calibration knob. Each job's profile is turned into a *macro-iteration*
profile (:func:`~commsched.workload.traces.helios.macro_profile`, about ``macro_iterations`` per job)
and its requested run time into an iteration count at the contention-free speed
(:func:`with_iterations`), so that network contention lengthens a job's run time.

Calibration and the Table-5 order
---------------------------------
The shipped calibration (median 3,000 s, sigma 1, offered load about 0.55 of the 512 GPUs at
lambda = 120 s) reproduces the paper's Best regime (average JCT about 4,900 s with about 260 s of
waiting, paper: 5,053 s). It does not reproduce vClos < SR < balanced ECMP: with locality packing
only the 64-128-GPU jobs (about 3% of the tasks) cross leaves, their hierarchical rings are
leaf-wise permutations, and each leaf has one uplink per GPU, so source routing collides rarely and
``balanced-ecmp`` (a global least-loaded *path* choice, stronger than the paper's per-port choice)
almost never; vClos pays for isolation with shape waits (equal servers per leaf, reserved links).
``--set`` changes the knobs (``median_duration_s``, ``sigma``, ``size_exponent``, ``comm_scale``,
``collective``, ...) to explore other regimes.

Modules
-------
The trace scenarios live in :mod:`commsched.experiments.vclos_experiment.trace`, the runs in
:mod:`commsched.experiments.vclos_experiment.runs` and the outputs in
:mod:`commsched.experiments.vclos_experiment.report`; this module re-exports their names.

References
----------
vClos §9.2 (5,000 Helios tasks, Poisson arrivals, FIFO), §9.4-9.6 (Figs. 12-13, Table 5).
"""

from __future__ import annotations

from commsched.experiments.vclos_experiment.report import experiment_json, plot_experiment, table5
from commsched.experiments.vclos_experiment.runs import (
    TABLE5_LAMBDAS,
    TABLE5_POLICIES,
    ExperimentSpec,
    PolicyRun,
    bundle,
    run_experiment,
    run_policy,
    simulate_policy,
)
from commsched.experiments.vclos_experiment.trace import (
    DEFAULT_TRACE,
    offered_load,
    parameter_groups,
    scenario_trace,
    standalone_iteration_s,
    trace_scenario,
    with_iterations,
)

__all__ = [
    "DEFAULT_TRACE",
    "TABLE5_LAMBDAS",
    "TABLE5_POLICIES",
    "ExperimentSpec",
    "PolicyRun",
    "bundle",
    "experiment_json",
    "offered_load",
    "parameter_groups",
    "plot_experiment",
    "run_experiment",
    "run_policy",
    "scenario_trace",
    "simulate_policy",
    "standalone_iteration_s",
    "table5",
    "trace_scenario",
    "with_iterations",
]
