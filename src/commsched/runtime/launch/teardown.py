"""The one teardown of a testbed: what its agents left, then its namespaces and state.

``commsched testbed down`` and the end of a testbed run (``commsched testbed run``) both call
:func:`tear_down`. The agents write down everything they make on a host before they make it (their
ledgers, :mod:`commsched.runtime.enforce.ledger`): job processes, cgroups, nftables tables. Those are
removed first, from the ledgers under the testbed's agents directory, then the namespaces the
testbed's state records (:func:`commsched.testbed.build.down`), then the state itself.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TornDown", "tear_down"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TornDown:
    """What :func:`tear_down` removed: namespaces, and the agents' processes, cgroups and tables."""

    namespaces: tuple[str, ...]
    agents_made: tuple[str, ...]


def tear_down(name: str) -> TornDown:
    """Remove testbed ``name`` and whatever its agents left; what was removed.

    Raises
    ------
    InputError
        No testbed of that name (nothing is touched).
    CapabilityError
        Without root / CAP_NET_ADMIN.
    TestbedError
        A namespace survived its deletion.
    """
    from commsched.runtime.enforce.ledger import clean_dir
    from commsched.testbed import build
    from commsched.testbed.state import agents_dir, read_state

    read_state(name)  # an unknown testbed is reported before anything is touched
    made = clean_dir(agents_dir(name), kill=True)
    gone = build.down(name)
    return TornDown(namespaces=tuple(gone), agents_made=tuple(made))
