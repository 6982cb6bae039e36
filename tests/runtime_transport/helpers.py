"""Run the ranks of one job as threads of the test process, on loopback."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from commsched.runtime import Communicator, Options, StoreServer, init
from commsched.runtime.transport.policy import DEFAULT_POLICY, ConnectionPolicy


def run_ranks(
    n: int,
    fn: Callable[[Communicator], Any],
    *,
    job: str = "csx-test",
    policy: ConnectionPolicy = DEFAULT_POLICY,
    timeout_s: float = 10.0,
    ranks_per_host: int | None = None,
    policy_refresh_s: float | None = None,
) -> list[Any]:
    """``fn(comm)`` on ``n`` ranks at once; returns the results in rank order, re-raising any error."""
    results: list[Any] = [None] * n
    errors: list[BaseException] = []
    with StoreServer() as store:

        def body(r: int) -> None:
            try:
                with init(
                    job=job,
                    rank=r,
                    world_size=n,
                    store=store.address,
                    options=Options(
                        policy=policy,
                        timeout_s=timeout_s,
                        ranks_per_host=ranks_per_host,
                        policy_refresh_s=policy_refresh_s,
                    ),
                ) as comm:
                    results[r] = fn(comm)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=body, args=(r,), name=f"csx-rank-{r}") for r in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=4 * timeout_s)
        if any(t.is_alive() for t in threads):
            raise AssertionError("a rank is still running: the collective hangs")
    if errors:
        raise errors[0]
    return results
