"""Invariants every communication policy must keep, as a public test helper.

The suite checks them on every built-in policy; a researcher runs :func:`check_policy` on their own::

    from commsched.testing import check_policy
    check_policy(my_policy)          # raises AssertionError listing every broken invariant

* :mod:`.invariants` — the invariants (one class per job, valid routes, valid compression,
  determinism, capacity), one check per invariant, :func:`check_policy` over all of them, and the
  small cluster states they are checked on;
* :mod:`.crowded` — crowded random components on which the simulator's exact and fast modes are
  compared (imported from there, not re-exported here).

Examples
--------
>>> from commsched.scheduling.state import Decisions
>>> from commsched.testing import check_decisions, example_states
>>> two_jobs = example_states()[0]                  # Crux Example 1: jobs a and b, 8 levels
>>> check_decisions(two_jobs, Decisions(classes={"a": 0, "b": 8}))
["job 'b' has class 8, outside 0..7"]
"""

from commsched.testing.invariants import (
    PolicyCheck,
    check_capacity,
    check_compression,
    check_decisions,
    check_determinism,
    check_policy,
    example_states,
    toy_job,
)

__all__ = [
    "PolicyCheck",
    "check_capacity",
    "check_compression",
    "check_decisions",
    "check_determinism",
    "check_policy",
    "example_states",
    "toy_job",
]
