"""The daemon's cluster configuration checked against the registries and built into a topology."""

from __future__ import annotations

from commsched.errors import CommschedError, InputError
from commsched.runtime.daemon.records import ClusterConfig
from commsched.topology import Topology

__all__ = ["build_cluster", "check_names"]


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
