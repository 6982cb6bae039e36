"""How a golden result is compared with a new run: byte for byte where the engine reproduces it, else
figure by figure within a relative tolerance.

The stored files were written by an engine that settled every step at every event; the engine now settles
lazily and adds a step's bytes to the link counters once per constant-pace stretch, so the same run sums
the same floating-point numbers in another order. What a golden pins then holds within ``RTOL`` relative
(every job's figures, the utilisations, busy time, the time base), except:

* the SHA-256 digests of the per-link byte counters and of the series derived from them (link
  utilisation and intensity), which no tolerance can read: their totals are held by the conservation
  tests of ``test_engine_invariants.py``;
* ``events``: the count of events popped, which includes the stale step ends an engine leaves in its queue
  (an implementation detail: the engine now keeps one pending end per component);
* the digest of every job (``jobs_digest``): the started jobs are compared one by one instead.

A fast-mode golden may move further, within the fast mode's own bounds against the exact mode
(:data:`commsched.testing.crowded.UTIL_BOUND`, :data:`commsched.testing.crowded.ITER_MAX_BOUND`): its
jumps extrapolate measured progress, which the order of the sums moves a little.
"""

from __future__ import annotations

import json
from typing import Any

from commsched.testing.crowded import ITER_MAX_BOUND, UTIL_BOUND

RTOL = 1e-9
#: digests of figures summed per link, and counts that depend on the engine's queue, not on the model
UNCOMPARABLE = frozenset(
    {"link_bytes", "link_intensity_bytes", "link_utilization", "link_intensity", "events", "jobs_digest"}
)
#: figures a fast-mode golden holds within the fast mode's bounds (absolute for utilisations)
_FAST_ABS = {"gpu_utilization": UTIL_BOUND, "allocated_gpu_utilization": UTIL_BOUND}


def _float(x: Any) -> float | None:
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            return None
    return None


def differences(stored: Any, new: Any, *, fast: bool, path: str = "") -> list[str]:
    """Where ``new`` differs from ``stored`` beyond the tolerance (an empty list: it reproduces it)."""
    key = path.rsplit(".", 1)[-1]
    if key in UNCOMPARABLE or stored == new:
        return []
    if isinstance(stored, dict) and isinstance(new, dict) and stored.keys() == new.keys():
        return [d for k in stored for d in differences(stored[k], new[k], fast=fast, path=f"{path}.{k}")]
    if isinstance(stored, list) and isinstance(new, list) and len(stored) == len(new):
        return [
            d
            for i, (a, b) in enumerate(zip(stored, new, strict=True))
            for d in differences(a, b, fast=fast, path=f"{path}[{i}]")
        ]
    a, b = _float(stored), _float(new)
    if a is None or b is None:
        return [f"{path}: {new!r} != {stored!r}"]
    if fast:
        bound = _FAST_ABS.get(key, ITER_MAX_BOUND * abs(a) if key != "t" else RTOL * abs(a))
    else:
        bound = RTOL * abs(a)
    return [] if abs(a - b) <= bound else [f"{path}: {new} != {stored} (bound {bound:.3g})"]


def check(stored_text: str, text: str, *, name: str, fast: bool) -> None:
    """Assert that a run's summary ``text`` reproduces the stored one (see the module notes)."""
    if stored_text == text:
        return
    wrong = differences(json.loads(stored_text), json.loads(text), fast=fast)
    assert not wrong, f"{name} differs: " + "; ".join(wrong[:20])
