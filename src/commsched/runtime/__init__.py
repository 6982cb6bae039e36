"""commsched.runtime: the pieces that enforce decisions on real hosts.

The job library (the Crux paper's CoCoLib + Crux Transport, §5) is importable from here: collectives
over TCP for NumPy buffers whose every connection binds the source port and sets the DSCP that a
connection policy gives (the host agent's client :class:`AgentPolicy`, or a :class:`StaticPolicy`),
and a profiler that measures ``W_j``, ``t_j`` and the iteration period of a job. A priority class
becomes its DSCP and TOS byte through :func:`mark_for_class` only. PyTorch integration:
:mod:`commsched.runtime.torch`.

Examples
--------
>>> from commsched.runtime import Marking, StaticPolicy
>>> StaticPolicy(dscp=10).marking("job-1", 0, 1)
Marking(source_port=None, dscp=10)
"""

from commsched.runtime.jobside.agentpolicy import AgentPolicy
from commsched.runtime.profiling.profiler import Profile, Profiler, iteration_period
from commsched.runtime.protocol.marks import Mark, mark_for_class
from commsched.runtime.transport import (
    Communicator,
    ConnectionInfo,
    ConnectionPolicy,
    Marking,
    Options,
    ProfilingWindowPolicy,
    StaticPolicy,
    StoreServer,
    init,
    init_from_env,
)

__all__ = [
    "AgentPolicy",
    "Communicator",
    "ConnectionInfo",
    "ConnectionPolicy",
    "Mark",
    "Marking",
    "Options",
    "Profile",
    "Profiler",
    "ProfilingWindowPolicy",
    "StaticPolicy",
    "StoreServer",
    "init",
    "init_from_env",
    "iteration_period",
    "mark_for_class",
]
