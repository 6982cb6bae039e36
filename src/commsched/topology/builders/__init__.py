"""Topology builders and the strict name -> builder registry used by scenario files and the CLI.

Every builder is a function with keyword parameters and documented defaults that returns a
:class:`~commsched.topology.graph.Topology` whose ``params`` records the resolved parameters.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from commsched.errors import InputError
from commsched.registry import Registry
from commsched.topology.builders.clos import three_layer_double_sided, two_layer_clos
from commsched.topology.builders.leaf_spine import leaf_spine
from commsched.topology.builders.lingjun import load_lingjun_topo, read_lingjun_rows
from commsched.topology.builders.small import crux_testbed, single_link
from commsched.topology.graph import Topology

Builder = Callable[..., Topology]

__all__ = [
    "Builder",
    "build_topology",
    "builder_parameters",
    "crux_testbed",
    "leaf_spine",
    "load_lingjun_topo",
    "read_lingjun_rows",
    "single_link",
    "three_layer_double_sided",
    "topology_builders",
    "two_layer_clos",
]


def topology_builders() -> Registry[Builder]:
    """A fresh registry of the topology builders by kind name.

    Examples
    --------
    >>> topology_builders().names()
    ('single_link', 'two_layer_clos', 'three_layer_double_sided', 'leaf_spine', 'crux_testbed', 'lingjun')
    """
    reg: Registry[Builder] = Registry("topology kind")
    reg.register("single_link", single_link)
    reg.register("two_layer_clos", two_layer_clos)
    reg.register("three_layer_double_sided", three_layer_double_sided)
    reg.register("leaf_spine", leaf_spine)
    reg.register("crux_testbed", crux_testbed)
    reg.register("lingjun", load_lingjun_topo)
    return reg


def builder_parameters(kind: str) -> tuple[str, ...]:
    """The parameter names a builder accepts (``path`` first for ``lingjun``)."""
    return tuple(inspect.signature(topology_builders().get(kind)).parameters)


def build_topology(
    kind: str, params: Mapping[str, Any] | None = None, *, where: str = "topology"
) -> Topology:
    """Build a topology by kind name from a parameter mapping (a scenario file's ``topology`` section).

    Parameters
    ----------
    kind
        A name of :func:`topology_builders`.
    params
        Keyword arguments of the builder. Unknown names raise :class:`InputError` listing the valid ones.
    where
        Location prefix for error messages (e.g. ``"s.yaml: topology"``).

    Examples
    --------
    >>> build_topology("leaf_spine", {"leaves": 2, "spines": 4}).params["hosts_per_leaf"]
    1
    >>> build_topology("single_link", {"speed": 1})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    commsched.errors.InputError: topology.speed: unknown parameter 'speed' ... capacity_bps, latency_s)
    """
    builder = topology_builders().get(kind, where=f"{where}.kind")
    sig = inspect.signature(builder).parameters
    given = dict(params or {})
    for name in given:
        if name not in sig:
            raise InputError(
                f"unknown parameter {name!r} for topology kind {kind!r}",
                where=f"{where}.{name}",
                expected="one of " + ", ".join(sig),
            )
    for name, p in sig.items():
        if p.default is inspect.Parameter.empty and name not in given:
            raise InputError(
                f"missing parameter {name!r} for topology kind {kind!r}", where=f"{where}.{name}"
            )
    return builder(**given)
