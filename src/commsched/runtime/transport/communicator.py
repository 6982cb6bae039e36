"""The job-facing handle: a group plus its collectives, created by :func:`init`.

Examples
--------
Two ranks in one process (threads), on loopback, rendezvous through a store:

>>> import threading, numpy as np
>>> from commsched.runtime import StoreServer, init
>>> results = {}
>>> with StoreServer() as store:
...     def rank(r):
...         with init(job="doc", rank=r, world_size=2, store=store.address) as comm:
...             results[r] = comm.all_reduce(np.full(5, r + 1.0))
...     threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
...     _ = [t.start() for t in threads]; _ = [t.join() for t in threads]
>>> results[0]
array([3., 3., 3., 3., 3.])
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from commsched.errors import InputError
from commsched.runtime.transport import collectives
from commsched.runtime.transport.group import ByteObserver, ConnectionInfo, Group, GroupConfig
from commsched.runtime.transport.policy import DEFAULT_POLICY, ConnectionPolicy, PolicyFunction, as_policy
from commsched.runtime.transport.rendezvous import StoreClient, rendezvous
from commsched.runtime.transport.sockets import make_listener


class Communicator:
    """Collectives of one rank of one job; close it (or use ``with``) when the job ends."""

    def __init__(self, group: Group) -> None:
        self.group = group

    @property
    def rank(self) -> int:
        """This process's rank."""
        return self.group.rank

    @property
    def world_size(self) -> int:
        """Number of ranks of the job."""
        return self.group.world_size

    def all_reduce(
        self, arr: np.ndarray[Any, Any], *, op: str = "sum", algorithm: str = "ring"
    ) -> np.ndarray[Any, Any]:
        """In-place all-reduce; see :func:`commsched.runtime.transport.collectives.all_reduce`."""
        return collectives.all_reduce(self.group, arr, op=op, algorithm=algorithm)

    def all_gather(self, arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Every rank's ``arr``, stacked in rank order."""
        return collectives.all_gather(self.group, arr)

    def all_to_all(self, arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """``arr[j]`` to rank ``j``; returns what every rank sent here."""
        return collectives.all_to_all(self.group, arr)

    def send(self, arr: np.ndarray[Any, Any], dst: int) -> None:
        """Point-to-point send to ``dst``."""
        collectives.send(self.group, arr, dst)

    def recv(self, out: np.ndarray[Any, Any], src: int) -> np.ndarray[Any, Any]:
        """Point-to-point receive from ``src`` into ``out``."""
        return collectives.recv(self.group, out, src)

    def refresh_policy(self) -> None:
        """Re-ask the connection policy; re-mark (or re-bind) open connections that changed."""
        self.group.refresh_policy()

    def connections(self) -> list[ConnectionInfo]:
        """Open connections with addresses and the DSCP read back from each socket."""
        return self.group.connections()

    def close(self) -> None:
        """Close every connection of this rank."""
        self.group.close()

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """How a rank joins and runs (everything but who it is and where its peers are).

    Attributes
    ----------
    host
        Listen address when rendezvous goes through a store.
    policy
        A :class:`~commsched.runtime.transport.policy.ConnectionPolicy`, or a plain function
        ``(job, src, dst) -> (source_port or None, dscp)``.
    timeout_s
        Longest wait for any single socket operation or connection.
    rendezvous_timeout_s
        Longest wait for the other ranks to appear in the store (processes start at different times).
    ranks_per_host
        Ranks per host for the hierarchical ring (``None``: one).
    policy_refresh_s
        Re-ask the policy at the first collective after this many seconds (``None``: only on
        :meth:`Communicator.refresh_policy`).
    observer
        Receives ``(start, end, bytes)`` of every sent chunk, e.g. ``Profiler.record_transfer``.
    """

    host: str = "127.0.0.1"
    policy: ConnectionPolicy | PolicyFunction = DEFAULT_POLICY
    timeout_s: float = 30.0
    rendezvous_timeout_s: float = 300.0
    ranks_per_host: int | None = None
    policy_refresh_s: float | None = None
    observer: ByteObserver | None = None


DEFAULT_OPTIONS = Options()


def init(
    *,
    job: str,
    rank: int,
    world_size: int,
    peers: list[tuple[str, int]] | None = None,
    store: tuple[str, int] | None = None,
    options: Options = DEFAULT_OPTIONS,
) -> Communicator:
    """Join a job's group, either from an explicit ``peers`` list or through a rendezvous ``store``.

    With ``peers`` this rank listens on ``peers[rank]``. With ``store`` (a
    :class:`~commsched.runtime.transport.rendezvous.StoreServer` address) it listens on
    ``(options.host, 0)`` and exchanges addresses through the store.
    """
    policy = as_policy(options.policy)
    if (peers is None) == (store is None):
        raise InputError(
            "give exactly one of peers and store", where="init", expected="peers=[...] or store=(h, p)"
        )
    listener = None
    if store is not None:
        first = policy.marking(job, (rank - 1) % world_size, rank).dscp
        listener = make_listener((options.host, 0), dscp=first)
        client = StoreClient(store, timeout_s=options.rendezvous_timeout_s)
        try:
            peers = rendezvous(
                client, job=job, rank=rank, world_size=world_size, address=listener.getsockname()[:2]
            )
        except BaseException:
            listener.close()
            raise
        finally:
            client.close()
    assert peers is not None
    config = GroupConfig(
        job=job,
        rank=rank,
        world_size=world_size,
        peers=tuple((str(h), int(p)) for h, p in peers),
        policy=policy,
        timeout_s=options.timeout_s,
        ranks_per_host=options.ranks_per_host,
        policy_refresh_s=options.policy_refresh_s,
    )
    return Communicator(Group(config, listener=listener, observer=options.observer))


def init_from_env(
    *, policy: ConnectionPolicy | PolicyFunction = DEFAULT_POLICY, observer: ByteObserver | None = None
) -> Communicator:
    """:func:`init` from the environment a launcher sets.

    ``RANK`` and ``WORLD_SIZE`` (as ``torchrun`` sets them), ``COMMSCHED_JOB`` (default ``"job"``),
    and either ``COMMSCHED_STORE=host:port`` or ``COMMSCHED_PEERS=host:port,host:port,...``;
    optional ``COMMSCHED_HOST`` (listen address with a store), ``COMMSCHED_TIMEOUT_S``,
    ``COMMSCHED_RANKS_PER_HOST`` and ``COMMSCHED_POLICY_REFRESH_S``.
    """
    env = os.environ

    def need(name: str) -> str:
        if name not in env:
            raise InputError(
                f"environment variable {name} is not set", where=name, expected="set by the launcher"
            )
        return env[name]

    def addr(text: str, name: str) -> tuple[str, int]:
        host, _, port = text.rpartition(":")
        if not host or not port.isdigit():
            raise InputError(f"address {text!r}", where=name, expected="host:port")
        return host.strip("[]"), int(port)

    peers = (
        [addr(p, "COMMSCHED_PEERS") for p in env["COMMSCHED_PEERS"].split(",")]
        if "COMMSCHED_PEERS" in env
        else None
    )
    store = None if peers is not None else addr(need("COMMSCHED_STORE"), "COMMSCHED_STORE")
    rph = env.get("COMMSCHED_RANKS_PER_HOST")
    refresh = env.get("COMMSCHED_POLICY_REFRESH_S")
    options = Options(
        host=env.get("COMMSCHED_HOST", "127.0.0.1"),
        policy=policy,
        timeout_s=float(env.get("COMMSCHED_TIMEOUT_S", "30")),
        ranks_per_host=int(rph) if rph else None,
        policy_refresh_s=float(refresh) if refresh else None,
        observer=observer,
    )
    world = int(need("WORLD_SIZE"))
    return init(
        job=env.get("COMMSCHED_JOB", "job"),
        rank=int(need("RANK")),
        world_size=world,
        peers=peers,
        store=store,
        options=options,
    )
