"""The scheduling daemon: HTTP API, SQLite state, a recompute on every job event (Crux §5).

Importing this package needs only the core; the HTTP layer (:mod:`.api`, served by
:mod:`commsched.runtime.http.serving`) needs the ``runtime`` extra (FastAPI, uvicorn) and is imported
by the command line only.
"""

from commsched.runtime.daemon.decide import Cause, decide
from commsched.runtime.daemon.jobrequest import JobRequest, StateConflictError, UnknownJobError
from commsched.runtime.daemon.records import ClusterConfig, JobRecord, ProfileRecord
from commsched.runtime.daemon.service import DaemonService
from commsched.runtime.daemon.store import Store

__all__ = [
    "Cause",
    "ClusterConfig",
    "DaemonService",
    "JobRecord",
    "JobRequest",
    "ProfileRecord",
    "StateConflictError",
    "Store",
    "UnknownJobError",
    "decide",
]
