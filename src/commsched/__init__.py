"""commsched: communication scheduling for multi-tenant GPU training clusters.

Layers (lower never import higher): ``topology`` and ``workload`` at the bottom, ``scheduling`` (pure
decisions) above them, ``sim`` and ``intrajob`` on top of that, and the edges (``cli``, ``io``,
``experiments``) above everything.
"""

__version__ = "0.1.0"
