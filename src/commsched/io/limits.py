"""Bounds on what a scenario may ask for, checked before any work starts.

A scenario that is valid in form can still ask for an absurd amount of work: a horizon of 1e300 s, an
iteration of a nanosecond simulated exactly, a fabric of 10^5 ToRs, a synthetic trace of 10^8 jobs. These
checks refuse such scenarios up front with an estimate and a hint, instead of hanging or exhausting memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

#: the longest simulated horizon: 10 years of simulated time
MAX_HORIZON_S = 10 * 365 * 86_400.0
#: the most hosts a built fabric may have (estimated from its parameters before building it); 8x the
#: largest fabric of the papers' evaluations (2,048 hosts)
MAX_HOSTS = 16_384
#: the largest count parameter of a topology (ToRs, spines, uplinks, GPUs per host, ...)
MAX_COUNT = 16_384
#: the most jobs a scenario may hold (its own and its trace's)
MAX_JOBS = 1_000_000

#: topology parameters whose product bounds the number of hosts of a fabric
_HOST_FACTORS = ("tors", "leaves", "pods", "hosts_per_tor", "hosts_per_leaf", "hosts_per_tor_pair")


def non_finite(value: object, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Field paths under ``value`` that hold an infinite or NaN number.

    Examples
    --------
    >>> list(non_finite({"a": 1.0, "b": [2.0, float("inf")], "c": {"d": float("nan")}}))
    [('b', 1), ('c', 'd')]
    """
    if isinstance(value, float) and not math.isfinite(value):
        yield path
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from non_finite(v, (*path, str(k)))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from non_finite(v, (*path, i))


def topology_size(params: Mapping[str, object], kind: str = "") -> tuple[str, str, str] | None:
    """A problem ``(field, what, expected)`` if a topology's parameters ask for an absurd fabric.

    The number of hosts is estimated from the parameters (and the builder's defaults for those not
    given) before anything is built.

    Examples
    --------
    >>> topology_size({"tors": 100_000, "hosts_per_tor": 4})
    ('tors', '100000 is larger than the limit', 'at most 16,384')
    >>> topology_size({"tors": 8_000}, "two_layer_clos")[1]
    'the fabric would have about 32,000 hosts'
    >>> topology_size({"tors": 64, "hosts_per_tor": 4}) is None
    True
    """
    hosts = 1
    for k, v in (_defaults(kind) | dict(params)).items():
        if isinstance(v, int) and not isinstance(v, bool):
            if v > MAX_COUNT:
                return k, f"{v} is larger than the limit", f"at most {MAX_COUNT:,}"
            if k in _HOST_FACTORS and v > 0:
                hosts *= v
    if hosts > MAX_HOSTS:
        first = next(k for k in _HOST_FACTORS if k in params)
        return (
            first,
            f"the fabric would have about {hosts:,} hosts",
            f"at most {MAX_HOSTS:,} hosts (fewer ToRs or hosts per ToR)",
        )
    return None


def slow_rates(params: Mapping[str, object]) -> Iterator[str]:
    """Parameters that give a link speed (``*_bps``) below 1 bit/s: no fabric is that slow, and the
    transfer times they imply overflow.

    Examples
    --------
    >>> list(slow_rates({"capacity_bps": 1e-300, "uplink_bps": 1e11, "tors": 4}))
    ['capacity_bps']
    """
    for k, v in params.items():
        if k.endswith("_bps") and isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 1:
            yield k


def _defaults(kind: str) -> dict[str, object]:
    """The integer defaults of a topology builder's host-count parameters (none for an unknown kind)."""
    import inspect

    from commsched.topology.builders import topology_builders

    builders = topology_builders()
    if kind not in builders:
        return {}
    sig = inspect.signature(builders.get(kind)).parameters
    return {
        k: p.default
        for k, p in sig.items()
        if k in _HOST_FACTORS and isinstance(p.default, int) and not isinstance(p.default, bool)
    }
