"""The host agent: follows the daemon's decisions and tells local jobs their source port and DSCP.

:mod:`.ports` (the answer, pure), :mod:`.counters` and :mod:`.client` (:class:`AgentPolicy`, the
connection policy a job passes to the transport) need only the core; :mod:`.follower` needs
``httpx`` and :mod:`.app` FastAPI (the ``runtime`` extra).
"""

from commsched.runtime.agent.client import AgentPolicy
from commsched.runtime.agent.counters import CounterSource, NullCounters, ProcNetDevCounters, counter_source
from commsched.runtime.agent.ports import ProbeTable, answer, load_probe_table, parse_probe_table

__all__ = [
    "AgentPolicy",
    "CounterSource",
    "NullCounters",
    "ProbeTable",
    "ProcNetDevCounters",
    "answer",
    "counter_source",
    "load_probe_table",
    "parse_probe_table",
]
