"""Numbers at the output edge: no floating-point noise, utilisations within their physical range.

Sums of many floating-point increments leave noise in the last digits (a utilisation of
``1.0000000000000069``). Computations keep full precision; only what is written out (JSON, CSV, tables)
is rounded to :data:`SIGNIFICANT` digits, magnitudes below :data:`NOISE_FLOOR` become ``0.0``, and
fractions that cannot leave ``[0, 1]`` are clamped to it.
"""

from __future__ import annotations

import math

#: significant digits kept in written numbers (float64 carries 15-17; the noise sits below 12)
SIGNIFICANT = 12
#: magnitudes below this are written as 0.0 (a loss of ``2.22e-16`` is a difference of equal rates)
NOISE_FLOOR = 1e-12

#: keys whose values are fractions in [0, 1]
_FRACTION_KEYS = frozenset({"gpu_utilization", "allocated_gpu_utilization", "utilization"})


def tidy_float(x: float) -> float:
    """``x`` rounded to :data:`SIGNIFICANT` significant digits, ``0.0`` below :data:`NOISE_FLOOR`
    (non-finite values unchanged).

    Examples
    --------
    >>> tidy_float(1.0000000000000069)
    1.0
    >>> tidy_float(2.220446049250313e-16), tidy_float(-3e-13)
    (0.0, 0.0)
    >>> tidy_float(0.46640000000000004)
    0.4664
    >>> tidy_float(123456.789)
    123456.789
    """
    if not math.isfinite(x):
        return x
    if abs(x) < NOISE_FLOOR:
        return 0.0
    return float(f"{x:.{SIGNIFICANT}g}")


def clamp_fraction(x: float) -> float:
    """A fraction clamped to ``[0, 1]`` (rounding noise can put it just outside).

    Examples
    --------
    >>> clamp_fraction(1.0000000000000069), clamp_fraction(-1e-17), clamp_fraction(0.5)
    (1.0, 0.0, 0.5)
    """
    return x if not math.isfinite(x) else min(1.0, max(0.0, x))


def tidy(obj: object, key: str = "") -> object:
    """A copy of a JSON-like object with every float tidied, fractions (by key) clamped to ``[0, 1]``.

    Examples
    --------
    >>> tidy({"gpu_utilization": 1.0000000000000069, "jobs": [{"jct_s": 12.300000000000001}], "n": 3})
    {'gpu_utilization': 1.0, 'jobs': [{'jct_s': 12.3}], 'n': 3}
    """
    if isinstance(obj, bool) or obj is None:
        return obj
    if isinstance(obj, float):
        return tidy_float(clamp_fraction(obj) if key in _FRACTION_KEYS else obj)
    if isinstance(obj, dict):
        return {k: tidy(v, str(k)) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [tidy(v, key) for v in obj]
    return obj
