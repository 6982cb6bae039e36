"""Jobs, model profiles, collective algorithms, traces."""

from commsched.workload.records import (
    CollectiveSchedule,
    JobId,
    JobSpec,
    LayerProfile,
    ModelProfile,
    Step,
    SyncKind,
    Transfer,
)

__all__ = [
    "CollectiveSchedule",
    "JobId",
    "JobSpec",
    "LayerProfile",
    "ModelProfile",
    "Step",
    "SyncKind",
    "Transfer",
]
