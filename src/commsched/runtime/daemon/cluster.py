"""The daemon's cluster configuration checked against the registries and built into a topology."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from commsched.errors import CommschedError, InputError
from commsched.runtime.daemon.records import ClusterConfig
from commsched.topology import Topology

__all__ = ["build_cluster", "check_host", "check_names"]


def build_cluster(cfg: ClusterConfig) -> Topology | None:
    """The topology of ``cfg`` (``None`` when none is set); any builder failure is an :class:`InputError`."""
    from commsched.topology.builders import build_topology

    if not cfg.topology:
        return None
    params = {k: v for k, v in cfg.topology.items() if k != "kind"}
    kind = cfg.topology.get("kind")
    if not isinstance(kind, str):
        raise InputError(
            "missing or not a string", where="topology.kind", expected="a topology kind such as crux_testbed"
        )
    try:
        return build_topology(kind, params, where="topology")
    except InputError:
        raise
    except (TypeError, ValueError, ArithmeticError, CommschedError) as exc:
        raise InputError(
            f"cannot build it: {exc}", where="topology", expected="valid builder parameters"
        ) from None


def check_names(cfg: ClusterConfig) -> None:
    """Policy, placement and hash names of ``cfg`` exist (else :class:`UnknownNameError` listing them)."""
    from commsched.catalog import placement_registry
    from commsched.errors import UnknownNameError
    from commsched.runtime.daemon.decide import daemon_plans
    from commsched.topology.hashes import hash_functions

    plans = daemon_plans(cfg.policy)
    if cfg.policy not in plans:
        raise UnknownNameError("policy", cfg.policy, list(plans), where="policy")
    placement_registry().get(cfg.placement, where="placement")
    hash_functions().get(cfg.hash_name, where="hash")


def check_host(topology: Topology | None, name: str, nics: Sequence[Mapping[str, Any]]) -> None:
    """A registering host and its NICs exist in ``topology`` (nothing to check without one).

    Refused (:class:`InputError`, answered 400): a host the topology does not have (the message lists
    a few it has), a NIC id that is not one of this host's NICs.

    Examples
    --------
    >>> from commsched.topology.builders import build_topology
    >>> topo = build_topology("crux_testbed", {})
    >>> check_host(topo, "h0", [{"id": "h0/nic0"}])
    >>> check_host(topo, "h0", [{"id": "h1/nic0"}])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    commsched.errors.InputError: nics[0].id: 'h1/nic0' is not a NIC of host 'h0' (expected one of ...)
    """
    if topology is None:
        return
    hosts = {str(h.id): [str(n) for n in h.nics] for h in topology.hosts}
    if name not in hosts:
        some = ", ".join(list(hosts)[:6]) + (", ..." if len(hosts) > 6 else "")
        raise InputError(f"no host {name!r} in the cluster topology", where="name", expected=f"one of {some}")
    own = hosts[name]
    for i, nic in enumerate(nics):
        if str(nic.get("id")) not in own:
            raise InputError(
                f"{nic.get('id')!r} is not a NIC of host {name!r}",
                where=f"nics[{i}].id",
                expected="one of " + ", ".join(own),
            )
