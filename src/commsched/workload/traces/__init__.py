"""Job traces: records, loaders (Lingjun, Pollux/Philly, Gavel, Tiresias), a Crux-calibrated generator.

Loaders take paths and return a :class:`Trace`; :func:`to_job_specs` turns a trace into ``JobSpec``
records; :func:`trace_stats` measures a trace the way the Crux paper reports its production trace.
"""

from commsched.workload.traces.labels import GAVEL, LINGJUN, POLLUX, TIRESIAS, LabelMap
from commsched.workload.traces.lingjun import load_lingjun_trace
from commsched.workload.traces.philly import (
    load_gavel_trace,
    load_philly_csv,
    load_pollux_workload,
    load_tiresias_trace,
)
from commsched.workload.traces.records import Trace, TraceJob, to_job_specs
from commsched.workload.traces.stats import TraceStats, trace_stats
from commsched.workload.traces.synthetic import SyntheticParams, synthetic_trace

__all__ = [
    "GAVEL",
    "LINGJUN",
    "POLLUX",
    "TIRESIAS",
    "LabelMap",
    "SyntheticParams",
    "Trace",
    "TraceJob",
    "TraceStats",
    "load_gavel_trace",
    "load_lingjun_trace",
    "load_philly_csv",
    "load_pollux_workload",
    "load_tiresias_trace",
    "synthetic_trace",
    "to_job_specs",
    "trace_stats",
]
