"""The parameter-server experiments: scripted comparisons of the PS transports on shaped links.

* :mod:`.bench` — one emulated job per transport on a shaped link (or loopback), measured beside the
  model's prediction (:mod:`.predict`); the workers run :mod:`.emulate` (``python -m
  commsched.experiments.ps emulate SPEC``), the raw TCP goodput comes from :mod:`.probe`.
* :mod:`.dynamic` — Mercury against a tuned ByteScheduler while the link's rate changes.
* :mod:`.versus_ring` — BytePS against a ring all-reduce on the testbed's star
  (:mod:`commsched.testbed.star`); its processes are :mod:`.versus_procs`.

The runtime they drive is :mod:`commsched.runtime.ps`; the shaped links are the testbed's
(:mod:`commsched.testbed.shaped_link`, :mod:`commsched.testbed.star`, built by
:mod:`commsched.testbed.fabric`).
"""
