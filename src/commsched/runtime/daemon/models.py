"""Request bodies of the daemon's HTTP API (pydantic; they make the OpenAPI description).

Every model forbids unknown fields and non-finite numbers and coerces nothing (strict: ``"gpus": true``
and ``"gpus": "8"`` are not GPU counts), so a wrong body is refused with a 422 whose message names the
field. A NIC's ``ip`` must be an IPv4 or IPv6 address (``999.1.1.1`` is not).
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["API_VERSION", "ClusterIn", "CountersIn", "HostIn", "JobIn", "NicIn", "ProfileIn"]

#: version of the HTTP API, in every path (``/v1/...``) and in ``GET /health``
API_VERSION = 1

_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,63}$"
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_./:@+-]{0,127}$"
Finite = Annotated[float, Field(allow_inf_nan=False)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True, strict=True)


class ParallelIn(_Strict):
    """A job's parallel groups (docs/llm-jobs.md): ``tp * pp * dp`` equals its GPUs, ``ep`` divides ``dp``."""

    tp: int = Field(default=1, ge=1, le=1_000_000)
    pp: int = Field(default=1, ge=1, le=1_000_000)
    dp: int = Field(default=1, ge=1, le=1_000_000)
    ep: int = Field(default=1, ge=1, le=1_000_000)
    zero: int = Field(default=1, ge=0, le=3)
    micro_batches: int = Field(default=1, ge=1, le=1_000_000)
    schedule: str = Field(default="1f1b", pattern=r"^1f1b$")
    order: str = Field(default="tp-dp-pp", pattern=r"^(tp-dp-pp|tp-pp-dp)$")


class JobIn(_Strict):
    """A job starting: its id, its GPUs (explicit or a count), its declared profile."""

    id: str = Field(pattern=_ID, description="job id, unique among running jobs")
    gpus: int | None = Field(default=None, ge=1, le=1_000_000, description="GPU count (placed by the daemon)")
    gpu_ids: list[Annotated[str, Field(pattern=_NAME)]] | None = Field(
        default=None, min_length=1, max_length=100_000, description="explicit GPUs in rank order"
    )
    hosts: list[Annotated[str, Field(pattern=_NAME)]] | None = Field(
        default=None, min_length=1, max_length=100_000, description="explicit hosts (all their GPUs)"
    )
    gpus_per_host: int | None = Field(default=None, ge=1, le=1024)
    model: str | None = Field(default=None, max_length=128, description="zoo model name (commsched models)")
    compute_s: float | None = Field(default=None, gt=0, le=1e6, description="compute per iteration, s")
    comm_bytes: float | None = Field(
        default=None, ge=0, le=1e15, description="bytes synchronised per iteration"
    )
    overlap: float | None = Field(
        default=None, ge=0, le=1, description="fraction of compute before comm starts"
    )
    collective: str = Field(default="ring", max_length=64)
    parallel: ParallelIn | None = Field(default=None, description="TP/PP/DP/EP groups (docs/llm-jobs.md)")
    priority: int | None = Field(
        default=None,
        ge=0,
        le=63,
        description="priority class written on the job (0 = highest): the class the static policy gives it "
        "(beyond the cluster's levels: the lowest); other policies decide classes themselves",
    )


class ProfileIn(_Strict):
    """What the job's profiler measured (Crux §5.4): ``W_j`` as compute seconds, ``t_j`` as bytes."""

    compute_s: float = Field(gt=0, le=1e6, description="W_j: GPU compute per iteration on one GPU, s")
    comm_bytes: float = Field(ge=0, le=1e15, description="t_j: bytes synchronised per iteration")
    period_s: float = Field(gt=0, le=1e6, description="iteration period from the traffic's spectrum, s")
    overlap: float | None = Field(default=None, ge=0, le=1)


class NicIn(_Strict):
    id: str = Field(pattern=_NAME, description="NIC node id in the topology, e.g. h0/nic0")
    ip: str | None = Field(default=None, max_length=64, description="the NIC's address on the fabric")

    @field_validator("ip")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            raise ValueError(f"{value!r} is not an IPv4 or IPv6 address") from None


class HostIn(_Strict):
    """An agent registering its host."""

    name: str = Field(pattern=_NAME)
    nics: list[NicIn] = Field(default_factory=list, max_length=1024)
    agent: str | None = Field(default=None, max_length=512, description="where the agent serves jobs")


class CountersIn(_Strict):
    """Link counters an agent reports: counter name -> value (bytes, packets)."""

    counters: dict[Annotated[str, Field(max_length=256)], Finite] = Field(max_length=100_000)


class ClusterIn(_Strict):
    """The cluster and how to decide for it; fields left out keep their current value."""

    topology: dict[str, Any] | None = Field(default=None, description="{kind: NAME, PARAM: VALUE, ...}")
    priority_levels: int | None = Field(default=None, ge=1, le=8)
    policy: str | None = Field(default=None, max_length=64)
    placement: str | None = Field(default=None, max_length=64)
    hash: str | None = Field(default=None, max_length=64)
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)
    profiling_window_s: float | None = Field(default=None, ge=0, le=86_400)
    heartbeat_timeout_s: float | None = Field(default=None, ge=0, le=86_400)
