"""Pinning and probing: which translated source ports put a job's connection on its decided paths.

* :mod:`.oracle`: the port search against a path oracle (:class:`~.oracle.PathOracle`; on a testbed, the
  routers' own routes: :class:`~.oracle.TestbedOracle`);
* :mod:`.probe`, :mod:`.pathprobe`, :mod:`.probeoracle`: the probing oracle of a real fabric (TTL probes,
  ICMP answers, the topology's candidate paths), on the fabric map of :mod:`.fabricmap`;
* :mod:`.replies`: the reverse direction under probing, the accepting host's replies' ports.

This room may use :mod:`commsched.runtime.enforce.marking` (the rules it installs, the tracked
connections), never the enforcer's core; the core (:mod:`commsched.runtime.enforce.pins`) decides
and installs the ports it finds (``tests/test_runtime_layout.py`` holds the order).
"""
