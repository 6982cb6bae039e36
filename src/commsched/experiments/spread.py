"""Spread independent runs over local processes (joblib) or a Ray cluster, in a fixed result order.

Every experiment that repeats a pure, seeded computation (one simulation per policy, one microbenchmark
case per index, one vClos run per lambda and policy) goes through :func:`spread`. The results come back
in the order of the arguments whatever the order in which the runs finish, so a sweep spread over a Ray
cluster gives the same output as ``workers=1``, apart from measured wall times. ``progress`` is called
in the calling process as each run finishes, in completion order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from commsched.errors import InputError

R = TypeVar("R")

#: ``--ray local`` starts a Ray instance in this process instead of joining a running cluster
LOCAL = "local"


def spread(
    fn: Callable[..., R],
    calls: Sequence[tuple[Any, ...]],
    *,
    workers: int = 1,
    ray_address: str | None = None,
    progress: Callable[[int, R], None] | None = None,
) -> list[R]:
    """``[fn(*args) for args in calls]``, run sequentially, over ``workers`` processes, or on Ray.

    Parameters
    ----------
    fn
        A module-level function (it is pickled to the workers).
    calls
        The positional arguments of each run.
    workers
        Local processes (joblib) when ``ray_address`` is ``None``; 1 runs in this process.
    ray_address
        ``"local"`` starts a Ray instance for the duration of the call; any other value is the address
        of a running Ray cluster (``ray.init(address=...)``), e.g. ``"auto"`` or ``"ray://host:10001"``.
    progress
        Called with ``(index into calls, result)`` as each run finishes.

    Returns
    -------
    list
        One result per call, in the order of ``calls``.

    Raises
    ------
    InputError
        ``workers < 1``; ``ray_address`` given but Ray is not installed or the cluster cannot be joined.

    Examples
    --------
    >>> spread(pow, [(2, 3), (3, 2)])
    [8, 9]
    """
    if workers < 1:
        raise InputError(f"{workers} workers", where="--workers", expected="at least 1")
    if ray_address is not None:
        return _on_ray(fn, calls, ray_address, progress)
    if workers == 1 or len(calls) <= 1:
        out: list[R] = []
        for i, args in enumerate(calls):
            out.append(fn(*args))
            if progress is not None:
                progress(i, out[-1])
        return out
    from joblib import Parallel, delayed

    results: list[R] = []
    stream = Parallel(n_jobs=min(workers, len(calls)), return_as="generator")(
        delayed(fn)(*args) for args in calls
    )
    for i, r in enumerate(stream):
        results.append(r)
        if progress is not None:
            progress(i, r)
    return results


def _on_ray(
    fn: Callable[..., R],
    calls: Sequence[tuple[Any, ...]],
    address: str,
    progress: Callable[[int, R], None] | None,
) -> list[R]:
    try:
        import ray
    except ImportError:
        raise InputError(
            "Ray is not installed", where="--ray", expected="pip install 'commsched[ray]', or omit --ray"
        ) from None
    started = not ray.is_initialized()
    if started:
        try:
            if address == LOCAL:
                ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
            else:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(
                f"cannot join Ray cluster {address!r}: {first}",
                where="--ray",
                expected="'local' or the address of a running Ray cluster",
            ) from None
    try:
        remote = ray.remote(fn)
        refs = [remote.remote(*args) for args in calls]
        index = {ref: i for i, ref in enumerate(refs)}
        done: dict[int, R] = {}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                i = index[ref]
                done[i] = ray.get(ref)
                if progress is not None:
                    progress(i, done[i])
        return [done[i] for i in range(len(refs))]
    finally:
        if started:
            ray.shutdown()
