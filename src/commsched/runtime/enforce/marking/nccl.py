"""What a job's communication library is told: NCCL's (and gloo's) environment for its class and rails.

The kernel enforces DSCP and paths on a job's TCP connections (:mod:`.enforcer`), NCCL's socket
transport included. What NCCL sends over RDMA (RoCE) the kernel never sees, so the agent hands out
what NCCL reads instead (:func:`job_environment`):

=========  =====  ==================  ==============  ==========================================
class      DSCP   traffic class (TC)  IB SL           switch queue
=========  =====  ==================  ==============  ==========================================
0 (high)   46     184                 0               strict-priority queue 0 (DSCP 46 -> q0)
1          40     160                 1               queue 1
...        ...    DSCP << 2           class           queue = class
7 (low)    0      0                   7               queue 7 (best effort)
=========  =====  ==================  ==============  ==========================================

* ``NCCL_IB_TC``: the traffic class of every RoCEv2 queue pair, the IP TOS byte: ``DSCP << 2``.
* ``NCCL_IB_SL``: the InfiniBand service level: the class number; the switches' SL-to-VL table
  must give SL ``k`` the priority of class ``k``.
* per communicator: NCCL >= 2.26 has ``ncclConfig_t.trafficClass``; PyTorch exposes it as
  ``ProcessGroupNCCL.Options().config.traffic_class`` (:func:`nccl_process_group_options`); the
  environment variable takes precedence over it in NCCL's IB transport.
* ``NCCL_SOCKET_IFNAME`` / ``GLOO_SOCKET_IFNAME``: the interfaces of the job's rails on this host
  (``=`` prefix: exact names); ``NCCL_IB_HCA``: the RDMA devices behind them (``/sys/class/infiniband``),
  left unset where there are none (the answer says so).

What NCCL cannot be told: the UDP source port of a RoCE queue pair, hence its path. NCCL sets the
flow label to 0 and the NIC derives the port from the queue pair numbers; choosing it takes a NCCL
net plugin that calls ``mlx5dv_modify_qp_udp_sport`` (or sets a flow label), or switch-side rules
(ACL / policy-based routing by the pair's addresses), see ``docs/real-jobs.md``.
"""

from __future__ import annotations

import fcntl
import socket
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict  # pydantic reads these on Python 3.11 (the agent's answers)

from commsched.runtime.protocol.marks import Mark, mark_for_class
from commsched.scheduling.dscp import default_dscp_table

__all__ = [
    "ClassRowJSON",
    "JobEnvironmentJSON",
    "class_table",
    "interface_addresses",
    "job_environment",
    "nccl_process_group_options",
    "rdma_devices",
]

SIOCGIFADDR = 0x8915


#: one row of :func:`class_table` (``class`` is a keyword, hence the functional form)
ClassRowJSON = TypedDict(
    "ClassRowJSON", {"class": int, "dscp": int, "traffic_class": int, "ib_sl": int, "queue": int}
)

#: :func:`job_environment`: the environment, what could not be set (variable -> why), class, DSCP, table
JobEnvironmentJSON = TypedDict(
    "JobEnvironmentJSON",
    {
        "env": dict[str, str],
        "not_set": dict[str, str],
        "class": int,
        "dscp": int,
        "table": list[ClassRowJSON],
    },
)


def class_table(levels: int = 8) -> list[ClassRowJSON]:
    """The DSCP -> traffic class -> switch queue table of the default classes.

    Examples
    --------
    >>> class_table(8)[0]
    {'class': 0, 'dscp': 46, 'traffic_class': 184, 'ib_sl': 0, 'queue': 0}
    """
    out: list[ClassRowJSON] = []
    for c in range(min(levels, default_dscp_table().levels)):
        mark = mark_for_class(c)
        out.append({"class": c, "dscp": mark.dscp, "traffic_class": mark.tos, "ib_sl": c, "queue": c})
    return out


def interface_addresses() -> dict[str, str]:
    """IPv4 address -> interface name, for every interface of this network namespace."""
    out: dict[str, str] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _index, name in socket.if_nameindex():
            req = struct.pack("16s16x", name.encode()[:15])
            try:
                res = fcntl.ioctl(s.fileno(), SIOCGIFADDR, req)
            except OSError:
                continue
            out[socket.inet_ntoa(res[20:24])] = name
    return out


def rdma_devices(sysfs: Path = Path("/sys/class/infiniband")) -> dict[str, str]:
    """Network interface -> RDMA device (``mlx5_0``), from ``/sys/class/infiniband/*/device/net``."""
    out: dict[str, str] = {}
    if not sysfs.is_dir():
        return out
    for dev in sorted(sysfs.iterdir()):
        net = dev / "device" / "net"
        if net.is_dir():
            for iface in net.iterdir():
                out[iface.name] = dev.name
    return out


def job_environment(
    info: Mapping[str, Any],
    nic_ips: Iterable[str],
    *,
    interfaces: Mapping[str, str],
    hcas: Mapping[str, str],
    levels: int = 8,
) -> JobEnvironmentJSON:
    """The environment a job's processes on this host get, and what could not be set (and why).

    ``info``: the job's entry of the decision (``class``, ``dscp``, ``tos``); ``nic_ips``: the
    addresses of the job's NICs on this host; ``interfaces``: address -> interface;
    ``hcas``: interface -> RDMA device.

    Examples
    --------
    >>> out = job_environment({"class": 1, "dscp": 40, "tos": 160}, ["10.0.0.1"],
    ...                       interfaces={"10.0.0.1": "c0"}, hcas={})
    >>> out["env"]["NCCL_IB_TC"], out["env"]["NCCL_SOCKET_IFNAME"], sorted(out["not_set"])
    ('160', '=c0', ['NCCL_IB_HCA'])
    """
    cls = int(info.get("class") or 0)
    mark = Mark(dscp=int(info.get("dscp") or 0))
    dscp, tos = mark.dscp, mark.tos
    ifs = [interfaces[ip] for ip in dict.fromkeys(nic_ips) if ip in interfaces]
    env = {
        "NCCL_IB_TC": str(tos),
        "NCCL_IB_SL": str(cls),
        "COMMSCHED_CLASS": str(cls),
        "COMMSCHED_DSCP": str(dscp),
        "COMMSCHED_TRAFFIC_CLASS": str(tos),
    }
    not_set: dict[str, str] = {}
    if ifs:
        env["NCCL_SOCKET_IFNAME"] = "=" + ",".join(ifs)
        env["GLOO_SOCKET_IFNAME"] = ",".join(ifs)
    else:
        why = "no interface of this host holds the job's NIC addresses"
        not_set["NCCL_SOCKET_IFNAME"] = not_set["GLOO_SOCKET_IFNAME"] = why
    devs = [hcas[i] for i in ifs if i in hcas]
    if devs:
        env["NCCL_IB_HCA"] = "=" + ",".join(dict.fromkeys(devs))
    else:
        not_set["NCCL_IB_HCA"] = (
            f"no RDMA device behind {', '.join(ifs) or 'the job NICs'} (NCCL uses sockets)"
        )
    return {"env": env, "not_set": not_set, "class": cls, "dscp": dscp, "table": class_table(levels)}


def nccl_process_group_options(traffic_class: int) -> Any:
    """``ProcessGroupNCCL.Options`` whose communicators use ``traffic_class`` (NCCL >= 2.26).

    For ``torch.distributed.init_process_group("nccl", pg_options=...)`` or ``new_group``. Raises
    :class:`~commsched.errors.CapabilityError` when this torch has no NCCL (CPU builds).
    """
    from commsched.errors import CapabilityError

    try:
        from torch.distributed import ProcessGroupNCCL
    except ImportError:
        raise CapabilityError(
            "this torch has no ProcessGroupNCCL (a CPU build)", where="nccl_process_group_options"
        ) from None
    opts = ProcessGroupNCCL.Options()
    opts.config.traffic_class = int(traffic_class)  # type: ignore[attr-defined]  # NCCL >= 2.26 builds
    return opts
