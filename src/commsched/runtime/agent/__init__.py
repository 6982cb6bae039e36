"""The host agent (the server): follows the daemon's decisions, tells local jobs their port and DSCP.

:mod:`.ports` (the answer, pure) and :mod:`.counters` need only the core; :mod:`.follower`,
:mod:`.jobs_api`, :mod:`.metrics` and :mod:`.app` are the agent process (FastAPI: the ``runtime``
extra). The job's side of the conversation, :class:`~commsched.runtime.jobside.agentpolicy.AgentPolicy`,
lives in :mod:`commsched.runtime.jobside`: a training job imports it, never the agent.
"""

from commsched.runtime.agent.counters import CounterSource, NullCounters, ProcNetDevCounters, counter_source
from commsched.runtime.agent.ports import ProbeTable, answer, load_probe_table, parse_probe_table

__all__ = [
    "CounterSource",
    "NullCounters",
    "ProbeTable",
    "ProcNetDevCounters",
    "answer",
    "counter_source",
    "load_probe_table",
    "parse_probe_table",
]
