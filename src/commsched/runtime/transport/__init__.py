"""Collectives over TCP with per-connection path pinning (source port) and priority marking (DSCP).

Modules: :mod:`.frame` (wire format), :mod:`.policy` (source port + DSCP per connection),
:mod:`.sockets` (sockets), :mod:`.rendezvous` (rendezvous), :mod:`.group` (one rank's connections),
:mod:`.collectives` (the algorithms), :mod:`.communicator` (the job-facing handle).
"""

from commsched.runtime.transport.communicator import Communicator, Options, init, init_from_env
from commsched.runtime.transport.group import ConnectionInfo, Group, GroupConfig
from commsched.runtime.transport.policy import (
    ConnectionPolicy,
    Marking,
    ProfilingWindowPolicy,
    StaticPolicy,
    get_dscp,
    set_dscp,
)
from commsched.runtime.transport.rendezvous import StoreClient, StoreServer

__all__ = [
    "Communicator",
    "ConnectionInfo",
    "ConnectionPolicy",
    "Group",
    "GroupConfig",
    "Marking",
    "Options",
    "ProfilingWindowPolicy",
    "StaticPolicy",
    "StoreClient",
    "StoreServer",
    "get_dscp",
    "init",
    "init_from_env",
    "set_dscp",
]
