"""Roles from the environment: BytePS/ps-lite ``DMLC_*`` variables or ``torchrun``'s.

``DMLC_ROLE`` (scheduler | server | worker), ``DMLC_PS_ROOT_URI``/``DMLC_PS_ROOT_PORT`` (the scheduler),
``DMLC_NUM_WORKER``, ``DMLC_NUM_SERVER``, ``DMLC_WORKER_ID`` (optional), ``DMLC_NODE_HOST`` (the address a
server announces, default: the one it reaches the scheduler from; the address a worker's connections
to the servers leave from), ``BYTEPS_LOCAL_RANK``.
Without ``DMLC_ROLE``, ``torchrun``'s ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/``MASTER_PORT``
make every process a worker with a co-located server (BytePS's co-located arrangement); rank 0 also
runs the scheduler on ``MASTER_PORT + 1`` (``MASTER_PORT`` itself stays free for ``torch.distributed``).

commsched's own knobs: ``COMMSCHED_PS_TRANSPORT`` (fifo | bytescheduler | p3 | mercury),
``COMMSCHED_PS_TIMEOUT`` (seconds, default 30), ``BYTEPS_PARTITION_BYTES``, ``COMMSCHED_PS_CREDIT_BYTES``,
and the job's mark: ``COMMSCHED_PS_CLASS`` (its priority class, 0 = highest, as the daemon decides it:
:func:`commsched.runtime.protocol.marks.mark_for_class`) or ``COMMSCHED_PS_DSCP`` (a DSCP code point, 0-63),
not both; every socket of the job then carries it on both ends (``IP_TOS`` / ``IPV6_TCLASS`` =
``dscp << 2``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from commsched.errors import InputError
from commsched.runtime.protocol.marks import Mark, mark_for_class
from commsched.runtime.ps.transports import TransportConfig

ROLES: tuple[str, ...] = ("scheduler", "server", "worker")


@dataclass(frozen=True, slots=True, kw_only=True)
class RoleEnv:
    """One process's role and the job's shape, read from the environment."""

    role: str
    root: tuple[str, int]
    num_workers: int
    num_servers: int
    rank: int | None = None
    local_rank: int = 0
    node_host: str | None = None
    colocated: bool = False
    timeout_s: float = 30.0
    transport: TransportConfig = field(default_factory=TransportConfig)


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        if default is None:
            raise InputError("is not set", where=name, expected="an integer environment variable")
        return default
    try:
        return int(raw)
    except ValueError:
        raise InputError(f"{raw!r}", where=name, expected="an integer") from None


def transport_from_env(env: Mapping[str, str]) -> TransportConfig:
    """The job's transport from ``COMMSCHED_PS_*`` / ``BYTEPS_PARTITION_BYTES``."""
    name = env.get("COMMSCHED_PS_TRANSPORT", "fifo")
    mark = mark_from_env(env)
    base = TransportConfig.named(name, mark=mark)
    return TransportConfig(
        name=base.name,
        partition_bytes=_int(env, "BYTEPS_PARTITION_BYTES", base.partition_bytes),
        credit_bytes=_int(env, "COMMSCHED_PS_CREDIT_BYTES", base.credit_bytes),
        packet_bytes=base.packet_bytes,
        mark=mark,
    )


def mark_from_env(env: Mapping[str, str]) -> Mark | None:
    """The job's mark from ``COMMSCHED_PS_CLASS`` or ``COMMSCHED_PS_DSCP``; ``None`` when neither is set.

    Examples
    --------
    >>> mark_from_env({"COMMSCHED_PS_CLASS": "1"}), mark_from_env({"COMMSCHED_PS_DSCP": "46"}).tos
    (Mark(dscp=40), 184)
    """
    given = [k for k in ("COMMSCHED_PS_CLASS", "COMMSCHED_PS_DSCP") if env.get(k) not in (None, "")]
    if len(given) > 1:
        raise InputError("both are set", where=" and ".join(given), expected="a class or a DSCP, not both")
    if not given:
        return None
    if given[0] == "COMMSCHED_PS_CLASS":
        return mark_for_class(_int(env, "COMMSCHED_PS_CLASS"))
    return Mark(dscp=_int(env, "COMMSCHED_PS_DSCP"))


def role_from_env(env: Mapping[str, str] | None = None) -> RoleEnv:
    """Read the role of this process.

    Examples
    --------
    >>> r = role_from_env({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
    ...                    "MASTER_PORT": "29500"})
    >>> r.role, r.rank, r.num_servers, r.root
    ('worker', 1, 2, ('127.0.0.1', 29501))
    """
    env = os.environ if env is None else env
    timeout = float(env.get("COMMSCHED_PS_TIMEOUT", "30"))
    transport = transport_from_env(env)
    role = env.get("DMLC_ROLE")
    if role is not None:
        if role not in ROLES:
            raise InputError(f"{role!r}", where="DMLC_ROLE", expected="one of " + ", ".join(ROLES))
        uri = env.get("DMLC_PS_ROOT_URI")
        if not uri:
            raise InputError("is not set", where="DMLC_PS_ROOT_URI", expected="the scheduler's address")
        wid = env.get("DMLC_WORKER_ID")
        return RoleEnv(
            role=role,
            root=(uri, _int(env, "DMLC_PS_ROOT_PORT")),
            num_workers=_int(env, "DMLC_NUM_WORKER"),
            num_servers=_int(env, "DMLC_NUM_SERVER"),
            rank=None if wid in (None, "") else _int(env, "DMLC_WORKER_ID"),
            local_rank=_int(env, "BYTEPS_LOCAL_RANK", 0),
            node_host=env.get("DMLC_NODE_HOST") or None,
            timeout_s=timeout,
            transport=transport,
        )
    if "RANK" in env and "WORLD_SIZE" in env:
        world = _int(env, "WORLD_SIZE")
        return RoleEnv(
            role="worker",
            root=(env.get("MASTER_ADDR", "127.0.0.1"), _int(env, "MASTER_PORT", 29500) + 1),
            num_workers=world,
            num_servers=_int(env, "COMMSCHED_PS_NUM_SERVER", world),
            rank=_int(env, "RANK"),
            local_rank=_int(env, "LOCAL_RANK", 0),
            colocated=True,
            timeout_s=timeout,
            transport=transport,
        )
    raise InputError(
        "no role in the environment",
        where="DMLC_ROLE / RANK",
        expected="DMLC_ROLE with DMLC_PS_ROOT_URI/PORT, DMLC_NUM_WORKER/SERVER; or RANK/WORLD_SIZE",
    )
