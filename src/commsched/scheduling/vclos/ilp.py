"""The integer programs of vClos stage 2 and OCS-vClos stage 3, solved with HiGHS (``scipy.optimize.milp``).

Both take a small problem record built from the fabric state and return the chosen leaves/spines, or
``None`` when the program is infeasible. :func:`brute_force_clos` solves the vClos problem exactly by
enumeration; tests and the benchmark use it as the reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from math import comb

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from commsched.errors import InputError


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosProblem:
    """vClos-ILP inputs (Appendix A.2) for one shape: ``l`` virtual leaves of ``s`` GPUs, ``s`` planes.

    ``free[n, p]`` says whether leaf ``n``'s cable in plane ``p`` is unused (C_{n,m});
    ``leaf_ok[n]`` whether leaf ``n`` has the ``s / T`` idle servers a virtual leaf needs (5);
    ``leaf_cost``/``plane_cost`` are RSN(L_n)*T and RPN(S_m) of objective (6).
    """

    free: NDArray[np.bool_]
    leaf_ok: NDArray[np.bool_]
    leaf_cost: NDArray[np.float64]
    plane_cost: NDArray[np.float64]
    nl: int  # l: virtual leaves
    s: int  # s: GPUs per virtual leaf = virtual spines


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosSolution:
    """Chosen leaves and planes (sorted), and the objective value."""

    leaves: tuple[int, ...]
    planes: tuple[int, ...]
    cost: float


@dataclass(slots=True)
class _Rows:
    """A sparse constraint matrix (COO triplets) with its row bounds, built by blocks of rows (arrays) or
    row by row (plain lists: many small rows cost no array each)."""

    rows: list[NDArray[np.int64]] = field(default_factory=list)
    cols: list[NDArray[np.int64]] = field(default_factory=list)
    vals: list[NDArray[np.float64]] = field(default_factory=list)
    lo: list[float] = field(default_factory=list)
    hi: list[float] = field(default_factory=list)
    one_rows: list[int] = field(default_factory=list)
    one_cols: list[int] = field(default_factory=list)
    one_vals: list[float] = field(default_factory=list)

    def block(
        self,
        rr: NDArray[np.int64],
        cc: NDArray[np.int64],
        vv: NDArray[np.float64],
        n_rows: int,
        bounds: tuple[float, float],
    ) -> None:
        """``n_rows`` rows; ``rr`` numbers them from 0 within the block."""
        self.rows.append(rr + len(self.lo))
        self.cols.append(cc)
        self.vals.append(vv)
        self.lo.extend([bounds[0]] * n_rows)
        self.hi.extend([bounds[1]] * n_rows)

    def row(self, entries: list[tuple[int, float]], bounds: tuple[float, float]) -> None:
        """One row from its ``(column, value)`` entries."""
        r = len(self.lo)
        for c, v in entries:
            self.one_rows.append(r)
            self.one_cols.append(c)
            self.one_vals.append(v)
        self.lo.append(bounds[0])
        self.hi.append(bounds[1])

    def solve(
        self, cost: NDArray[np.float64], ub: NDArray[np.float64], *, presolve: bool, time_limit_s: float
    ) -> tuple[NDArray[np.int64], float] | None:
        """The integer solution of ``min cost x`` over ``0 <= x <= ub`` and these rows (HiGHS), and
        the objective value HiGHS reports."""
        nv = cost.size
        vals = np.concatenate([*self.vals, np.array(self.one_vals, dtype=np.float64)])
        rows = np.concatenate([*self.rows, np.array(self.one_rows, dtype=np.int64)])
        cols = np.concatenate([*self.cols, np.array(self.one_cols, dtype=np.int64)])
        a = coo_matrix((vals, (rows, cols)), shape=(len(self.lo), nv))
        res = milp(
            cost,
            constraints=LinearConstraint(a.tocsr(), np.array(self.lo), np.array(self.hi)),
            integrality=np.ones(nv),
            bounds=Bounds(np.zeros(nv), ub),
            options={"presolve": presolve, "time_limit": time_limit_s, "disp": False},
        )
        if res.x is None or res.status not in (0, 1):  # 0 optimal, 1 limit reached with a solution
            return None
        return np.round(res.x).astype(np.int64), float(res.fun)


def _prune(p: ClosProblem) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Leaves and planes that can take part: a leaf needs s free cables into usable planes, a plane
    l free cables from usable leaves (repeated to a fixed point)."""
    leaf = p.leaf_ok.copy()
    plane = np.ones(p.free.shape[1], dtype=bool)
    while True:
        sub = p.free & leaf[:, None] & plane[None, :]
        new_leaf = leaf & (sub.sum(axis=1) >= p.s)
        new_plane = plane & (sub.sum(axis=0) >= p.nl)
        if (new_leaf == leaf).all() and (new_plane == plane).all():
            return leaf, plane
        leaf, plane = new_leaf, new_plane


def solve_clos_ilp(
    problem: ClosProblem, *, presolve: bool = True, time_limit_s: float = 60.0
) -> ClosSolution | None:
    """Solve the vClos-ILP: choose ``l`` leaves and ``s`` planes whose cables are all free.

    Variables are x_n (leaf n hosts a virtual leaf), y_p (plane p is a virtual spine) and c_{n,p}
    (cable reserved), binary. Constraints (2)-(5): sum x = l, sum y = s, sum_p c_{n,p} = s x_n,
    sum_n c_{n,p} = l y_p, c_{n,p} <= y_p, c_{n,p} = 0 where the cable is busy, x_n = 0 where the leaf
    lacks idle servers. Objective (6): min sum RPN*y + sum RSN*T*x.

    Examples
    --------
    >>> free = np.ones((3, 2), dtype=bool); free[0, 1] = False
    >>> pr = ClosProblem(free=free, leaf_ok=np.ones(3, dtype=bool), leaf_cost=np.zeros(3),
    ...                  plane_cost=np.zeros(2), nl=2, s=2)
    >>> solve_clos_ilp(pr).leaves
    (1, 2)

    References
    ----------
    vClos Appendix A.2, equations (2)-(6); Algorithm 3.
    """
    L, U = problem.free.shape
    if problem.nl < 1 or problem.s < 1:
        raise InputError("a virtual Clos needs l >= 1 and s >= 1", where="ClosProblem")
    leaf, plane = _prune(problem)
    if leaf.sum() < problem.nl or plane.sum() < problem.s:
        return None
    edges = np.argwhere(problem.free & leaf[:, None] & plane[None, :])
    E = len(edges)
    cost = np.concatenate([problem.leaf_cost, problem.plane_cost, np.zeros(E)])
    ub = np.concatenate([leaf.astype(float), plane.astype(float), np.ones(E)])
    found = _clos_rows(problem, edges).solve(cost, ub, presolve=presolve, time_limit_s=time_limit_s)
    if found is None:
        return None
    x, value = found
    leaves = tuple(int(n) for n in np.flatnonzero(x[:L]))
    planes = tuple(int(p) for p in np.flatnonzero(x[L : L + U]))
    return ClosSolution(leaves=leaves, planes=planes, cost=value)


def _clos_rows(problem: ClosProblem, edges: NDArray[np.int64]) -> _Rows:
    """Constraints (2)-(4) over the variables ``x`` (leaves), ``y`` (planes), ``c`` (usable cables)."""
    L, U = problem.free.shape
    E = len(edges)
    ci = np.arange(E) + L + U
    one = np.ones
    out = _Rows()
    out.block(np.zeros(L, np.int64), np.arange(L), one(L), 1, (problem.nl, problem.nl))  # (2) sum x = l
    out.block(np.zeros(U, np.int64), L + np.arange(U), one(U), 1, (problem.s, problem.s))  # (2) sum y = s
    # (3) sum_p c_{n,p} - s x_n = 0, per leaf
    out.block(
        np.concatenate([edges[:, 0], np.arange(L)]),
        np.concatenate([ci, np.arange(L)]),
        np.concatenate([one(E), -problem.s * one(L)]),
        L,
        (0.0, 0.0),
    )
    # (3) sum_n c_{n,p} - l y_p = 0, per plane
    out.block(
        np.concatenate([edges[:, 1], np.arange(U)]),
        np.concatenate([ci, L + np.arange(U)]),
        np.concatenate([one(E), -problem.nl * one(U)]),
        U,
        (0.0, 0.0),
    )
    # (4) c_{n,p} <= y_p
    out.block(
        np.concatenate([np.arange(E), np.arange(E)]),
        np.concatenate([ci, L + edges[:, 1]]),
        np.concatenate([one(E), -one(E)]),
        E,
        (-np.inf, 0.0),
    )
    return out


def brute_force_clos(problem: ClosProblem) -> ClosSolution | None:
    """Exact reference for :func:`solve_clos_ilp` by enumerating every set of ``l`` usable leaves.

    For a leaf set the best planes are the ``s`` cheapest planes free on all of them, so the
    enumeration is exact. Exponential in ``l``: for small fabrics, tests and benchmarks only.
    """
    leaf, _ = _prune(problem)
    best: ClosSolution | None = None
    for combo in combinations(np.flatnonzero(leaf).tolist(), problem.nl):
        common = np.flatnonzero(problem.free[list(combo)].all(axis=0))
        if len(common) < problem.s:
            continue
        order = common[np.argsort(problem.plane_cost[common], kind="stable")][: problem.s]
        cost = float(problem.leaf_cost[list(combo)].sum() + problem.plane_cost[order].sum())
        if best is None or cost < best.cost - 1e-9:
            best = ClosSolution(leaves=tuple(combo), planes=tuple(sorted(int(p) for p in order)), cost=cost)
    return best


def solve_clos(problem: ClosProblem, *, max_enumeration: int = 20_000) -> ClosSolution | None:
    """Exact solution of the vClos problem by the faster route: enumeration when the usable leaf sets
    number at most ``max_enumeration``, else the ILP (HiGHS).

    On fragmented fabrics the ILP's LP relaxation is weak (a biclique problem) and HiGHS can take
    tens of seconds where enumerating a few thousand leaf sets takes milliseconds; both are exact.
    """
    leaf, _ = _prune(problem)
    if comb(int(leaf.sum()), problem.nl) <= max_enumeration:
        return brute_force_clos(problem)
    return solve_clos_ilp(problem)


@dataclass(frozen=True, slots=True, kw_only=True)
class OcsProblem:
    """OCS-vClos-ILP inputs (Appendix A.3) for one shape ``(l, s)``.

    ``leaf_slots[n]`` is how many virtual leaves leaf ``n`` can host (idle servers // (s/T));
    ``leaf_free[n, k]`` and ``spine_free[m, k]`` count idle leaf up ports and spine ports on OCS ``k``
    (C_n^k, C_m^k); ``leaf_cost`` is RSN(L_n)*T per virtual leaf, ``spine_cost`` RPN(S_m) per virtual
    spine.
    """

    leaf_slots: NDArray[np.int64]
    leaf_free: NDArray[np.int64]
    spine_free: NDArray[np.int64]
    leaf_cost: NDArray[np.float64]
    spine_cost: NDArray[np.float64]
    nl: int  # l: virtual leaves
    s: int  # s: GPUs per virtual leaf = virtual spines


@dataclass(frozen=True, slots=True, kw_only=True)
class OcsSolution:
    """Virtual leaves per leaf, virtual spines per spine, circuits ``circuits[n, a, m, k]``."""

    vleaves: NDArray[np.int64]
    vspines: NDArray[np.int64]
    circuits: NDArray[np.int64]


def solve_ocs_ilp(
    problem: OcsProblem, *, presolve: bool = True, time_limit_s: float = 60.0
) -> OcsSolution | None:
    """Solve the OCS-vClos-ILP for one shape.

    Variables: L_{n,a} binary (a-th virtual leaf on leaf n, monotone in a), y_m integer (virtual
    spines on spine m), w_{n,a,m} = L_{n,a} * y_m (linearised), c_{n,a,m,k} circuits through OCS k with
    sum_k c = w. Constraints (7)-(11): sum L = l, sum y = s, per-OCS port budgets of every leaf and
    spine. Objective (12).

    References
    ----------
    vClos Appendix A.3, equations (7)-(12); Algorithm 4.
    """
    ix = _OcsIndex.of(problem)
    L, A, S, K = ix.L, ix.A, ix.S, ix.K
    ub = np.zeros(ix.nv)
    for n in range(L):
        ub[n * A : n * A + min(A, int(problem.leaf_slots[n]))] = 1.0
    ub[ix.oY : ix.oY + S] = ix.ymax
    ub[ix.oW : ix.oC] = np.repeat(np.tile(ix.ymax, L * A), 1)
    ub[ix.oC :] = np.repeat(np.tile(ix.ymax, L * A), K)
    cost = np.zeros(ix.nv)
    cost[: ix.oY] = np.repeat(problem.leaf_cost, A)
    cost[ix.oY : ix.oY + S] = problem.spine_cost
    found = _ocs_rows(problem, ix).solve(cost, ub, presolve=presolve, time_limit_s=time_limit_s)
    if found is None:
        return None
    x = found[0]
    return OcsSolution(
        vleaves=x[: ix.oY].reshape(L, A),
        vspines=x[ix.oY : ix.oY + S],
        circuits=x[ix.oC :].reshape(L, A, S, K),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _OcsIndex:
    """Column numbers of the OCS-vClos-ILP: L_{n,a}, then y_m, then w_{n,a,m}, then c_{n,a,m,k}."""

    L: int  # leaves
    A: int  # virtual-leaf slots per leaf
    S: int  # spines
    K: int  # OCSes
    ymax: NDArray[np.int64]  # per spine, the most virtual spines it can host

    @classmethod
    def of(cls, problem: OcsProblem) -> _OcsIndex:
        L, K = problem.leaf_free.shape
        ymax = np.minimum(problem.spine_free.sum(axis=1) // problem.nl, problem.s).astype(np.int64)
        A = int(max(1, problem.leaf_slots.max(initial=0)))
        return cls(L=L, A=A, S=problem.spine_free.shape[0], K=K, ymax=ymax)

    @property
    def oY(self) -> int:
        return self.L * self.A

    @property
    def oW(self) -> int:
        return self.oY + self.S

    @property
    def oC(self) -> int:
        return self.oW + self.L * self.A * self.S

    @property
    def nv(self) -> int:
        return self.oC + self.L * self.A * self.S * self.K

    def iL(self, n: int, a: int) -> int:
        return n * self.A + a

    def iW(self, n: int, a: int, m: int) -> int:
        return int(self.oW + (n * self.A + a) * self.S + m)

    def iC(self, n: int, a: int, m: int, k: int) -> int:
        return int(self.oC + ((n * self.A + a) * self.S + m) * self.K + k)


def _ocs_rows(problem: OcsProblem, ix: _OcsIndex) -> _Rows:
    """Constraints (7)-(11): counts, monotone slots, the linearised products and the port budgets."""
    L, A, S, K = ix.L, ix.A, ix.S, ix.K
    out = _Rows()
    out.row([(ix.iL(n, a), 1.0) for n in range(L) for a in range(A)], (problem.nl, problem.nl))
    out.row([(ix.oY + m, 1.0) for m in range(S)], (problem.s, problem.s))
    for n in range(L):
        for a in range(1, A):
            out.row([(ix.iL(n, a), 1.0), (ix.iL(n, a - 1), -1.0)], (-np.inf, 0.0))
        for a in range(A):
            for m in range(S):
                w, y, lv, big = ix.iW(n, a, m), ix.oY + m, ix.iL(n, a), float(ix.ymax[m])
                out.row([(w, 1.0), (y, -1.0)], (-np.inf, 0.0))
                out.row([(w, 1.0), (lv, -big)], (-np.inf, 0.0))
                out.row([(w, 1.0), (y, -1.0), (lv, -big)], (-big, np.inf))
                out.row([(w, -1.0)] + [(ix.iC(n, a, m, k), 1.0) for k in range(K)], (0.0, 0.0))
        for k in range(K):
            out.row(
                [(ix.iC(n, a, m, k), 1.0) for a in range(A) for m in range(S)],
                (-np.inf, problem.leaf_free[n, k]),
            )
    for m in range(S):
        for k in range(K):
            out.row(
                [(ix.iC(n, a, m, k), 1.0) for n in range(L) for a in range(A)],
                (-np.inf, problem.spine_free[m, k]),
            )
    return out
