"""Jobs, model profiles, collective algorithms, traces."""

from commsched.workload.collectives import build_collective, collective_params, collective_registry
from commsched.workload.jobs import job_from_model, validate_job, validate_profile
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
from commsched.workload.zoo import (
    backward_order,
    backward_s,
    forward_s,
    get_model,
    gradient_ready_times,
    layer_bytes,
    list_models,
    model_names,
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
    "backward_order",
    "backward_s",
    "build_collective",
    "collective_params",
    "collective_registry",
    "forward_s",
    "get_model",
    "gradient_ready_times",
    "job_from_model",
    "layer_bytes",
    "list_models",
    "model_names",
    "validate_job",
    "validate_profile",
]
