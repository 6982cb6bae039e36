"""The emulated fabric testbed: a commsched topology as Linux namespaces, veth links and HTB queues.

See ``docs/testbed.md``. Layer: may import ``topology``, ``workload``, ``scheduling``; never ``sim`` or
``cli``. Modules: :mod:`.fabric` (every fabric kind planned by one function: routed topologies, the
star, the shaped link; and built), :mod:`.layout` (topology -> namespaces, cables, addresses),
:mod:`.config` (the ``ip`` text and sysctls of a routed fabric), :mod:`.htb` (every queueing rule),
:mod:`.star` and :mod:`.shaped_link` (their parts' names), :mod:`.tuning` (a built testbed tuned for
real jobs), :mod:`.build` (up, down, rewire), :mod:`.state` (state files), :mod:`.probe`
(source port per path), :mod:`.pinning` (source routing, plans), :mod:`.flows` and :mod:`.check`
(real TCP flows), :mod:`.counters` (utilisation series), :mod:`.scale` (rates and bytes),
:mod:`.handle` (the :class:`Testbed` a runtime loads).
"""

from commsched.testbed.build import down, names, rewire, up
from commsched.testbed.counters import CounterSampler, UtilisationSeries
from commsched.testbed.handle import Testbed
from commsched.testbed.probe import ProbeResult
from commsched.testbed.scale import default_rate_scale, scale_bytes

__all__ = [
    "CounterSampler",
    "ProbeResult",
    "Testbed",
    "UtilisationSeries",
    "default_rate_scale",
    "down",
    "names",
    "rewire",
    "scale_bytes",
    "up",
]
