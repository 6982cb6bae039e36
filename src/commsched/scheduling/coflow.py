"""Coflow orderings of the baselines: Sincronia's BSSI and Varys' SEBF (crux-spec §8.2).

Both work on the *big-switch* model: the fabric is one non-blocking switch whose only constraints are
its ports (each host's NIC uplink = ingress port, downlink = egress port). A coflow (for Crux's
setting: one job's per-iteration traffic) is described by its load on every port, in bytes.
``big_switch_loads`` builds that matrix from a list of flows.

* ``sincronia_order``: Bottleneck-Select-Scale-Iterate. Fill the order from the **last** position:
  take the most loaded port ``b`` over the unscheduled coflows; among them put last the coflow ``c``
  minimising ``w_c / load_c(b)``; scale the other weights ``w_k -= w_c * load_k(b) / load_c(b)``;
  repeat. With one port and unit weights this is shortest-processing-time first; with weights it is
  Smith's rule.
* ``varys_order``: Smallest Effective Bottleneck First, ``Gamma_c = max_p load_c(p) / rate_p``.

Ties are broken by coflow index (the lower index gets the higher priority), so the orders are
deterministic.

References
----------
.. [1] S. Agarwal, S. Rajakrishnan, A. Narayan, R. Agarwal, D. Shmoys, A. Vahdat, "Sincronia:
   Near-Optimal Network Design for Coflows", SIGCOMM 2018, §3 (Algorithm 1, BSSI).
.. [2] M. Chowdhury, Y. Zhong, I. Stoica, "Efficient Coflow Scheduling with Varys", SIGCOMM 2014,
   §5.1 (SEBF).
.. [3] Crux (SIGCOMM 2024) §4.4 and §6 (Sincronia and Varys as baselines); crux-spec §8.1, §8.2.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from commsched.errors import InputError

__all__ = ["big_switch_loads", "sincronia_order", "varys_order"]


def _check_loads(loads: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(loads, dtype=np.float64)
    if arr.ndim != 2:
        raise InputError(f"shape {arr.shape}", where="loads", expected="a (coflows x ports) matrix")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise InputError("negative or non-finite load", where="loads", expected="finite bytes >= 0")
    return arr


def _check_vector(values: ArrayLike | None, size: int, where: str, *, positive: bool) -> NDArray[np.float64]:
    if values is None:
        return np.ones(size)
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape != (size,):
        raise InputError(f"shape {arr.shape}", where=where, expected=f"shape ({size},)")
    low_ok = np.all(arr > 0) if positive else np.all(arr >= 0)
    if not np.all(np.isfinite(arr)) or not low_ok:
        raise InputError(
            "bad value", where=where, expected="finite values " + ("> 0" if positive else ">= 0")
        )
    return arr


def big_switch_loads(
    coflow: ArrayLike,
    src_host: ArrayLike,
    dst_host: ArrayLike,
    size_bytes: ArrayLike,
    *,
    shape: tuple[int, int],
) -> NDArray[np.float64]:
    """Per-coflow port loads of the big-switch model from a list of flows.

    Parameters
    ----------
    coflow, src_host, dst_host, size_bytes
        One entry per flow: its coflow index, source and destination host, and bytes.
    shape
        ``(number of coflows, number of hosts)``.

    Returns
    -------
    numpy.ndarray
        ``(coflows, 2 * hosts)``: columns ``0 .. H-1`` are the hosts' ingress (uplink) ports,
        ``H .. 2H-1`` their egress (downlink) ports.

    Examples
    --------
    >>> big_switch_loads([0, 0, 1], [0, 1, 0], [1, 0, 1], [5.0, 5.0, 2.0], shape=(2, 2)).tolist()
    [[5.0, 5.0, 5.0, 5.0], [2.0, 0.0, 0.0, 2.0]]

    References
    ----------
    Sincronia §2 (big-switch model); crux-spec §8.2 (ports = NIC up/down links).
    """
    n_coflows, n_hosts = shape
    cof = np.asarray(coflow, dtype=np.int64)
    src = np.asarray(src_host, dtype=np.int64)
    dst = np.asarray(dst_host, dtype=np.int64)
    size = np.asarray(size_bytes, dtype=np.float64)
    if not cof.shape == src.shape == dst.shape == size.shape or cof.ndim != 1:
        raise InputError(
            "flow arrays differ in shape", where="flows", expected="four 1-D arrays of one length"
        )
    for name, arr, upper in (
        ("coflow", cof, n_coflows),
        ("src_host", src, n_hosts),
        ("dst_host", dst, n_hosts),
    ):
        if arr.size and (arr.min() < 0 or arr.max() >= upper):
            raise InputError("index out of range", where=name, expected=f"integers in 0..{upper - 1}")
    if not np.all(np.isfinite(size)) or np.any(size < 0):
        raise InputError("negative or non-finite size", where="size_bytes", expected="finite bytes >= 0")
    loads = np.zeros((n_coflows, 2 * n_hosts))
    np.add.at(loads, (cof, src), size)
    np.add.at(loads, (cof, n_hosts + dst), size)
    return loads


def sincronia_order(
    loads: ArrayLike, *, weights: ArrayLike | None = None, port_rates: ArrayLike | None = None
) -> tuple[int, ...]:
    """Sincronia's BSSI ordering of coflows (first = highest priority).

    Parameters
    ----------
    loads
        ``(coflows, ports)`` bytes of each coflow on each big-switch port.
    weights
        Coflow weights (default 1; Crux's setting may use the job's number of GPUs).
    port_rates
        Port rates (default 1): loads are divided by them, so the bottleneck is in time.

    Examples
    --------
    One port, unit weights: shortest first.

    >>> sincronia_order([[3.0], [1.0], [2.0]])
    (1, 2, 0)

    A heavy weight lifts a large coflow ahead (Smith's rule, ``w / load``):

    >>> sincronia_order([[3.0], [1.0], [2.0]], weights=[10.0, 1.0, 1.0])
    (0, 1, 2)

    References
    ----------
    Sincronia (SIGCOMM 2018) §3, Algorithm 1; crux-spec §8.2.
    """
    arr = _check_loads(loads)
    n, ports = arr.shape
    arr = arr / _check_vector(port_rates, ports, "port_rates", positive=True)
    residual = _check_vector(weights, n, "weights", positive=False).copy()
    remaining = list(range(n))
    order: list[int] = []
    while remaining:
        sub = arr[remaining]
        port_load = sub.sum(axis=0)
        bottleneck = int(np.argmax(port_load))
        if port_load[bottleneck] <= 0:  # the rest carry no load: keep them in index order
            order.extend(reversed(remaining))
            break
        on_b = sub[:, bottleneck]
        ratio = np.full(len(remaining), np.inf)
        np.divide(residual[remaining], on_b, out=ratio, where=on_b > 0)
        # last position: the smallest ratio; among ties the highest index goes last
        pos = len(remaining) - 1 - int(np.argmin(ratio[::-1]))
        chosen = remaining[pos]
        scale = residual[chosen] / on_b[pos]
        residual[remaining] = np.maximum(residual[remaining] - scale * on_b, 0.0)
        order.append(chosen)
        del remaining[pos]
    return tuple(reversed(order))


def varys_order(loads: ArrayLike, *, port_rates: ArrayLike | None = None) -> tuple[int, ...]:
    """Varys' SEBF ordering: smallest effective bottleneck ``max_p load(p) / rate_p`` first.

    Examples
    --------
    >>> varys_order([[4.0, 0.0], [0.0, 3.0], [2.0, 2.0]], port_rates=[1.0, 2.0])
    (1, 2, 0)

    References
    ----------
    Varys (SIGCOMM 2014) §5.1 (SEBF); crux-spec §8.2.
    """
    arr = _check_loads(loads)
    n, ports = arr.shape
    gamma = (arr / _check_vector(port_rates, ports, "port_rates", positive=True)).max(axis=1, initial=0.0)
    return tuple(int(c) for c in np.lexsort((np.arange(n), gamma)))
