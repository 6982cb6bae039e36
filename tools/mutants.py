"""Planted one-line mutants of core modules: does the test suite notice each of them?

Each :class:`Mutant` names a file, an exact snippet of it (which must occur exactly once), its
replacement and the tests that should fail with it. For every mutant the script writes the mutated file,
runs ``pytest -x -q`` on those tests and restores the file; a mutant whose tests fail is *killed*, one
whose tests pass *survived* (a defect the tests let through). The score is killed / all.

Exit status: 0 when the score is at least :data:`MIN_SCORE` and every ``planted`` mutant (the bugs the
house-keeping issue planted by hand) is killed; 1 otherwise; 2 when a mutant is
stale (its snippet is not found exactly once, or its tests do not exist: the code moved, update the
table :data:`MUTANTS`, which is plain data at the top of this file for that reason) or its tests could
not run at all (pytest's exit status other than 0 or 1).

Safety: the script edits the files of the checkout it lives in (this file's ``../src``), never another
one; the tests run in a fork of this process (which has imported the third-party modules but never
commsched) with that ``src`` first on ``sys.path`` and without writing bytecode (a mutated module never
lands in ``__pycache__``). Before a file is mutated its original text is written to
:data:`JOURNAL`; the file is restored in a ``finally`` (also on Ctrl-C and SIGTERM), and a journal left
behind by a killed run is restored at the next start (``--restore`` does only that).

Mutants run ``--jobs`` at a time (2 by default), each in a checkout of its own: a private copy of
``src`` (modification times kept, so that numba's caches stay valid) beside links to everything else,
in a temporary folder; the tests' subprocesses import that copy (``PYTHONPATH``). The checkout itself is
then never edited; ``--jobs 1`` mutates it in place, as above.

``make test`` runs it after the suite has passed (the tests listed here pass unmutated then);
``--baseline`` checks that first on its own.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
JOURNAL = ROOT / ".mutants-journal.json"

#: the least share of mutants the tests must kill
MIN_SCORE = 0.85
#: seconds one mutant's tests may take (a mutant that makes them hang counts as killed, reported apart);
#: unmutated, the longest set (tests/profiling) takes ~80 s beside another set on two cores
TIMEOUT_S = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class Mutant:
    """One planted defect: ``original`` (exactly once in ``path``) becomes ``replacement``."""

    name: str
    path: str  # relative to the repository root
    original: str
    replacement: str
    tests: tuple[str, ...]  # pytest node ids, files or folders, relative to the repository root
    planted: bool = False  # one of the bugs the house-keeping issue planted by hand


_FLUID = "src/commsched/sim/fast/fluid.py"
_RATES = "src/commsched/sim/reference/maxmin.py"
_ITER = "src/commsched/sim/jobs/iteration.py"
_FLUID_EXACT = "tests/sim/test_fluid_against_exact.py"
_GOLDEN = "tests/sim/test_golden.py::test_golden"
_CRUX = "tests/policies/test_policy_crux.py"
_SCENARIO_ERRORS = "tests/io/test_scenario_errors.py::test_bad_input_is_reported"
_KINETO_EVENTS = "src/commsched/workload/profiling/kineto_events.py"


MUTANTS: tuple[Mutant, ...] = (
    # --- the simulator: fluid (fast mode), rates, paces, iterations
    Mutant(
        name="fluid latency ignores repeats",
        path=_FLUID,
        original="        latency += s.repeat * s.latency_s\n        bw.append(",
        replacement="        latency += s.latency_s\n        bw.append(",
        tests=(_FLUID_EXACT,),
        planted=True,
    ),
    Mutant(
        name="fluid ignores priority classes",
        path=_FLUID,
        original="levels, cls_idx = np.unique(classes, return_inverse=True)",
        replacement="levels, cls_idx = np.unique(np.zeros_like(classes), return_inverse=True)",
        tests=(_FLUID_EXACT, "tests/sim/test_fluid.py::test_strict_priority_between_classes"),
        planted=True,
    ),
    Mutant(
        name="fluid counts a job's own load against it",
        path=_FLUID,
        original="1.0 - (upto[pb.e_bucket] - rho[pb.ep])",
        replacement="1.0 - upto[pb.e_bucket]",
        tests=("tests/sim/test_golden_crowded.py",),
    ),
    Mutant(
        name="rates: a lower class sees the full capacity",
        path=_RATES,
        original="rates[members] = _fill(mat, residual, cap)",
        replacement="rates[members] = _fill(mat, residual.copy(), cap)",
        tests=("tests/sim/test_rates.py::test_capacity_respected",),
    ),
    Mutant(
        name="rates: water level not accumulated",
        path=_RATES,
        original="        water += delta\n",
        replacement="        water = delta\n",
        tests=("tests/sim/test_rates.py::test_max_min_optimal_within_class",),
    ),
    Mutant(
        name="pace ignores a step's repeats",
        path="src/commsched/sim/rates/flowkernel.py",
        original="return float(1.0 / (PF[row, REPEAT] * (PF[row, LAT] + PF[row, MAXFLOW] / pace)))",
        replacement="return float(1.0 / (PF[row, LAT] + PF[row, MAXFLOW] / pace))",
        tests=("tests/sim/test_collective_timing.py",),
    ),
    Mutant(
        name="communication released after all of the compute",
        path=_ITER,
        original="r.release_s = t + r.overlap * c",
        replacement="r.release_s = t + c",
        tests=(f"{_GOLDEN}[crux-fig19--ecmp-fair-h60]",),
    ),
    Mutant(
        name="busy time not per GPU",
        path=_ITER,
        original="        r.busy_gpu_s += r.gpu_count * r.spec.busy_s\n",
        replacement="        r.busy_gpu_s += r.spec.busy_s\n",
        tests=("tests/sim/test_crux_examples.py",),
    ),
    # --- decisions: Crux path selection, ranking, compression
    Mutant(
        name="crux paths taken in increasing intensity",
        path="src/commsched/scheduling/policies/crux.py",
        original="key=lambda f: (-f.intensity.value, f.job.id)",
        replacement="key=lambda f: (f.intensity.value, f.job.id)",
        tests=(
            f"{_CRUX}::test_a16_two_most_intensive_jobs_get_disjoint_paths",
            f"{_CRUX}::test_the_most_intensive_of_three_jobs_on_two_paths_gets_its_path_alone",
            f"{_GOLDEN}[crux-fig19--crux-full-h60]",
        ),
    ),
    Mutant(
        name="greedy path by least total instead of least bottleneck",
        path="src/commsched/scheduling/paths.py",
        original="    primary = scores.max(axis=1)\n",
        replacement="    primary = scores.sum(axis=1)\n",
        tests=("tests/scheduling/test_sched_paths.py",),
    ),
    Mutant(
        name="intensity inverted",
        path="src/commsched/scheduling/intensity.py",
        original="value=work / t_j if t_j > 0 else 0.0",
        replacement="value=t_j / work if work > 0 else 0.0",
        tests=(f"{_CRUX}::test_intensity_is_gpu_seconds_over_bottleneck_time",),
    ),
    Mutant(
        name="ranking ignores the correction factor",
        path="src/commsched/scheduling/correction/__init__.py",
        original="key=lambda key: (-factor[key] * intensity[key], -intensity[key], key)",
        replacement="key=lambda key: (-intensity[key], key)",
        tests=(f"{_CRUX}::test_a3_example1_correction_factor",),
    ),
    Mutant(
        name="reference job: the lowest injected rate",
        path="src/commsched/scheduling/correction/__init__.py",
        original="key=lambda key: (-injected_rate_bytes_per_s[key], key)",
        replacement="key=lambda key: (injected_rate_bytes_per_s[key], key)",
        tests=(f"{_CRUX}::test_a8_example2_ranks_the_delay_sensitive_job_first",),
    ),
    Mutant(
        name="k-cut gain subtracted",
        path="src/commsched/scheduling/compression/kcut.py",
        original="best[k - 1][:, None] + gain, -np.inf)",
        replacement="best[k - 1][:, None] - gain, -np.inf)",
        tests=("tests/scheduling/test_sched_compression.py::test_fig13_optimum_and_baselines",),
    ),
    Mutant(
        name="compiled k-cut gain subtracted",
        path="src/commsched/scheduling/compression/kcut.py",
        original="v = best[k - 1, j] + (s_full[j, i] - s_full[j, j])",
        replacement="v = best[k - 1, j] - (s_full[j, i] - s_full[j, j])",
        tests=(
            "tests/scheduling/test_sched_compression.py::test_the_layerwise_tables_equal_the_column_scan",
        ),
    ),
    Mutant(
        name="listed frozen members summed out of the class's order",
        path="src/commsched/sim/rates/flowfill.py",
        original="    frozen[:n].sort()  # the group's order, as the full scan meets them",
        replacement="    pass",
        tests=(
            "tests/sim/test_bound_solve.py::test_listed_freezing_is_the_scan_bit_for_bit_in_any_order_of_sums",
        ),
    ),
    Mutant(
        name="listed freezing reads one saturated link only",
        path="src/commsched/sim/rates/flowfill.py",
        original="    for link in sat:\n        p = int(LF[link, POS])",
        replacement="    for link in sat[:1]:\n        p = int(LF[link, POS])",
        tests=(
            "tests/sim/test_bound_solve.py::test_large_classes_listed_by_link_are_the_reference_bit_for_bit",
        ),
    ),
    # --- the house-keeping issue's blind spots (planted by hand; killed by whole folders, not a chosen test)
    Mutant(
        name="job reach drops the candidate paths",
        path="src/commsched/scheduling/domains.py",
        original=(
            "    parts.extend(f.candidates.ravel() for f in "
            "(job_flows(table, job) if flows is None else flows))\n"
        ),
        replacement="    pass\n",
        tests=("tests/scheduling", "tests/sim"),
        planted=True,
    ),
    Mutant(
        name="kineto busy time: a nested kernel ends the busy span",
        path=_KINETO_EVENTS,
        original="            cur_b = max(cur_b, b)\n",
        replacement="            cur_b = b\n",
        tests=("tests/profiling",),
        planted=True,
    ),
    Mutant(
        name="kineto collective size: elements taken for bytes",
        path="src/commsched/workload/profiling/kineto.py",
        original="size = float(nelems) * element_size(str(dtype)) if",
        replacement="size = float(nelems) if",
        tests=("tests/profiling",),
        planted=True,
    ),
    # --- scenario validation
    Mutant(
        name="warm-up equal to the horizon accepted",
        path="src/commsched/io/scenario.py",
        original="if raw.warmup_s >= raw.horizon_s:",
        replacement="if raw.warmup_s > raw.horizon_s:",
        tests=(f"{_SCENARIO_ERRORS}[warm-up at the horizon]",),
    ),
    Mutant(
        name="priority class equal to the levels accepted",
        path="src/commsched/io/scenario_jobs.py",
        original="if entry.priority is not None and entry.priority >= levels:",
        replacement="if entry.priority is not None and entry.priority > levels:",
        tests=(f"{_SCENARIO_ERRORS}[priority class equal to the number of levels]",),
    ),
    Mutant(
        name="duplicate job ids accepted",
        path="src/commsched/io/scenario.py",
        original="        if entry.id in seen:\n",
        replacement="        if entry.id in seen and entry.id not in seen:\n",
        tests=(f"{_SCENARIO_ERRORS}[duplicate job id]",),
    ),
    Mutant(
        name="a GPU given to two jobs accepted",
        path="src/commsched/io/scenario_jobs.py",
        original="if g in owner and j.spec.arrival_s == 0:",
        replacement="if g in owner and j.spec.arrival_s > 0:",
        tests=(f"{_SCENARIO_ERRORS}[a GPU given to two jobs]",),
    ),
    Mutant(
        name="infinite numbers pass the finiteness check",
        path="src/commsched/io/limits.py",
        original="if isinstance(value, float) and not math.isfinite(value):",
        replacement="if isinstance(value, float) and math.isnan(value):",
        tests=(
            "tests/hostile/test_hostile_scenarios.py::test_validate_and_simulate_refuse_alike[capacity-inf]",
        ),
    ),
    # --- the runtime (planted by the issue; the modules may move: update path and tests here)
    Mutant(
        name="DynamicComparison.holds with or for and",
        path="src/commsched/experiments/ps/dynamic.py",
        original="return self.balanced_gap > 0 and self.balanced_gap > self.static_gap",
        replacement="return self.balanced_gap > 0 or self.balanced_gap > self.static_gap",
        tests=("tests/experiments/ps/test_dynamic.py",),
        planted=True,
    ),
    Mutant(
        name="PS: DSCP used as TOS",
        path="src/commsched/runtime/ps/roles.py",
        original='return Mark(dscp=_int(env, "COMMSCHED_PS_DSCP"))',
        replacement='return Mark.from_tos(_int(env, "COMMSCHED_PS_DSCP"))',
        tests=("tests/runtime_ps/test_marks.py",),
        planted=True,
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one mutant's tests did: pytest's exit status (``None``: they hung), in ``seconds``."""

    mutant: Mutant
    code: int | None
    seconds: float

    @property
    def killed(self) -> bool:
        """The tests failed (status 1) or hung."""
        return self.code in (1, None)

    @property
    def broken(self) -> bool:
        """The tests could not run (a usage or internal error, nothing collected): not a verdict."""
        return self.code not in (0, 1, None)


def stale(mutants: tuple[Mutant, ...], root: Path = ROOT) -> list[str]:
    """Mutants whose snippet is not in their file exactly once, or whose tests are missing."""
    out = []
    for m in mutants:
        path = root / m.path
        if not path.is_file():
            out.append(f"{m.name}: no file {m.path}")
            continue
        n = path.read_text().count(m.original)
        if n != 1:
            out.append(f"{m.name}: the snippet occurs {n} times in {m.path} (expected once)")
        out.extend(
            f"{m.name}: no test file {t.split('::')[0]}"
            for t in m.tests
            if not (root / t.split("::")[0]).exists()  # a file, or a folder run as a whole
        )
    return out


def restore_journal(journal: Path = JOURNAL, root: Path = ROOT) -> str | None:
    """Put back a file a killed run left mutated; returns its path, or ``None`` with nothing to do."""
    if not journal.is_file():
        return None
    entry = json.loads(journal.read_text())
    (root / entry["path"]).write_text(entry["text"])
    journal.unlink()
    return str(entry["path"])


@contextmanager
def mutated(m: Mutant, *, root: Path = ROOT, journal: Path = JOURNAL) -> Iterator[None]:
    """The file of ``m`` mutated inside the block, restored (and the journal removed) on any exit."""
    path = root / m.path
    text = path.read_text()
    journal.write_text(json.dumps({"path": m.path, "text": text}))
    try:
        path.write_text(text.replace(m.original, m.replacement, 1))
        yield
    finally:
        path.write_text(text)
        journal.unlink(missing_ok=True)


#: third-party modules the test runs share: imported once, before any mutant, by this process (which
#: never imports commsched); each run is a fork that imports commsched afresh from the mutated sources
#: (not hypothesis: pytest rewrites the asserts of its plugin, which must not be imported before)
PRELOAD = (
    "numpy",
    "scipy.sparse",
    "scipy.sparse.csgraph",
    "scipy.sparse.linalg",
    "scipy.optimize",
    "scipy.linalg",
    "pydantic",
    "yaml",
    "pytest",
)


def preload() -> None:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
    assert not any(m == "commsched" or m.startswith("commsched.") for m in sys.modules)


def _start_pytest(tests: tuple[str, ...], *, root: Path, show: bool = False) -> int:
    """Fork a child that runs ``pytest -x -q`` on ``tests`` with ``root``'s sources; its pid."""
    args = ["-x", "-q", "-p", "no:cacheprovider", "--no-header", *tests]
    if root != ROOT:  # a worker's checkout: its own temporary folders too
        args.insert(0, f"--basetemp={root / '.pytest-tmp'}")
    pid = os.fork()
    if pid == 0:  # the child: this checkout's sources, no bytecode written, output silenced
        code = 3
        try:
            os.chdir(root)
            sys.path.insert(0, str(root / "src"))
            sys.dont_write_bytecode = True
            os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
            os.environ["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(root / "src"), os.environ.get("PYTHONPATH", "")) if p
            )
            if not show:
                quiet = os.open(os.devnull, os.O_WRONLY)
                os.dup2(quiet, 1)
                os.dup2(quiet, 2)
            import pytest

            code = int(pytest.main(args))
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


def _reap(pid: int) -> int | None:
    """The exit status of child ``pid`` if it has ended (``None`` while it runs)."""
    done, status = os.waitpid(pid, os.WNOHANG)
    return os.waitstatus_to_exitcode(status) if done else None


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _pytest(
    tests: tuple[str, ...], *, root: Path, timeout_s: float, show: bool = False
) -> tuple[int | None, float]:
    """Run ``pytest -x -q`` on ``tests`` in a forked child; the exit status (``None``: timed out)."""
    start = time.monotonic()
    pid = _start_pytest(tests, root=root, show=show)
    try:
        while True:
            code = _reap(pid)
            if code is not None:
                pid = 0
                return code, time.monotonic() - start
            if time.monotonic() - start > timeout_s:
                return None, time.monotonic() - start
            time.sleep(0.05)
    finally:  # timed out or interrupted: the child goes before the file is restored
        if pid:
            _kill(pid)


def worker_checkout(root: Path, into: Path) -> Path:
    """A checkout of ``root`` for one worker at ``into``: a copy of ``src`` with its files' times kept,
    and links to every other entry (the tests, the examples, the project's settings)."""
    into.mkdir(parents=True)
    for entry in root.iterdir():
        if entry.name == "src":
            shutil.copytree(entry, into / "src", symlinks=True)
        elif entry.name != JOURNAL.name:
            (into / entry.name).symlink_to(entry)
    return into


@dataclass(slots=True)
class _Running:
    index: int  # in the mutants run
    mutant: Mutant
    root: Path
    pid: int
    start: float
    text: str  # the file's text before the mutant
    mtime_ns: int  # and its modification time (numba's caches are keyed on it)


def run_parallel(
    mutants: tuple[Mutant, ...], roots: list[Path], *, timeout_s: float = TIMEOUT_S, show: bool = False
) -> list[Outcome]:
    """Every mutant, ``len(roots)`` at a time, each in one of the checkouts ``roots`` (which no two
    share at once); prints each as it ends; the outcomes in the order of ``mutants``."""
    todo, free, running, done = list(enumerate(mutants)), list(roots), list[_Running](), dict[int, Outcome]()
    try:
        while todo or running:
            while todo and free:
                (k, m), root = todo.pop(0), free.pop(0)
                path = root / m.path
                text, mtime_ns = path.read_text(), path.stat().st_mtime_ns
                path.write_text(text.replace(m.original, m.replacement, 1))
                pid = _start_pytest(m.tests, root=root, show=show)
                running.append(_Running(k, m, root, pid, time.monotonic(), text, mtime_ns))
            time.sleep(0.05)
            for r in list(running):
                code = _reap(r.pid)
                seconds = time.monotonic() - r.start
                if code is None and seconds <= timeout_s:
                    continue
                if code is None:
                    _kill(r.pid)
                _restore(r)
                running.remove(r)
                free.append(r.root)
                done[r.index] = o = Outcome(mutant=r.mutant, code=code, seconds=seconds)
                report(o)
    finally:  # interrupted: every child goes, every file is put back
        for r in running:
            _kill(r.pid)
            _restore(r)
    return [done[k] for k in range(len(mutants))]


def _restore(r: _Running) -> None:
    path = r.root / r.mutant.path
    path.write_text(r.text)
    os.utime(path, ns=(time.time_ns(), r.mtime_ns))


def report(o: Outcome) -> None:
    """One line per mutant: killed, SURVIVED or BROKEN, its seconds and name."""
    verdict = "killed" if o.killed else "BROKEN" if o.broken else "SURVIVED"
    extra = " (timed out)" if o.code is None else f" (pytest exit status {o.code})" if o.broken else ""
    print(
        f"  {verdict:8} {o.seconds:5.1f} s  {o.mutant.name}{' [planted]' if o.mutant.planted else ''}{extra}"
    )


def run_mutant(m: Mutant, *, root: Path = ROOT, timeout_s: float = TIMEOUT_S, show: bool = False) -> Outcome:
    with mutated(m, root=root, journal=root / JOURNAL.name):
        code, seconds = _pytest(m.tests, root=root, timeout_s=timeout_s, show=show)
    return Outcome(mutant=m, code=code, seconds=seconds)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="run the mutants whose name has this")
    parser.add_argument("--baseline", action="store_true", help="first check that the tests pass unmutated")
    parser.add_argument("--restore", action="store_true", help="only restore a file a killed run left")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--show", action="store_true", help="show the output of the tests")
    parser.add_argument(
        "--jobs", type=int, default=2, help="mutants at a time, each in a checkout of its own (1: in place)"
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, _terminate)  # also where the shell started it with SIGINT ignored
    left = restore_journal()
    if left is not None:
        print(f"mutants: restored {left}, left mutated by an interrupted run")
    if args.restore:
        return 0
    chosen = tuple(m for m in MUTANTS if not args.only or any(s in m.name for s in args.only))
    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.path} ({', '.join(m.tests)})")
        return 0
    problems = stale(chosen)
    if problems:
        listing = "\n  ".join(problems)
        print(f"mutants: stale entries (update tools/mutants.py):\n  {listing}", file=sys.stderr)
        return 2
    preload()
    if args.baseline:
        tests = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
        code, _ = _pytest(tests, root=ROOT, timeout_s=10 * TIMEOUT_S, show=args.show)
        if code != 0:
            print("mutants: the tests fail without a mutant", file=sys.stderr)
            return 1
    return run_all(chosen, jobs=args.jobs, show=args.show)


def run_all(chosen: tuple[Mutant, ...], *, jobs: int, show: bool) -> int:
    """Run ``chosen`` (``jobs`` at a time, each in a worker's checkout; 1: in place) and give the verdict."""
    start = time.monotonic()
    if jobs > 1:
        with tempfile.TemporaryDirectory(prefix="commsched-mutants-") as tmp:
            roots = [worker_checkout(ROOT, Path(tmp) / f"w{k}") for k in range(jobs)]
            try:
                outcomes = run_parallel(chosen, roots, show=show)
            except KeyboardInterrupt as stop:
                print(f"mutants: interrupted ({stop}); the checkout was never edited", file=sys.stderr)
                return 130
        return verdict_of(outcomes, seconds=time.monotonic() - start)
    outcomes = []
    for m in chosen:
        try:
            o = run_mutant(m, show=show)
        except KeyboardInterrupt as stop:
            print(f"mutants: interrupted ({stop}); {m.path} restored", file=sys.stderr)
            return 130
        outcomes.append(o)
        report(o)
    return verdict_of(outcomes, seconds=time.monotonic() - start)


def verdict_of(outcomes: list[Outcome], *, seconds: float) -> int:
    """Print the score; the exit status (0: at least :data:`MIN_SCORE` and every planted bug killed)."""
    killed = sum(o.killed for o in outcomes)
    score = killed / len(outcomes) if outcomes else 1.0
    print(
        f"mutants: {killed}/{len(outcomes)} killed, score {score:.0%} "
        f"(at least {MIN_SCORE:.0%}), {seconds:.0f} s"
    )
    alive = [o.mutant.name for o in outcomes if o.mutant.planted and not o.killed]
    if alive:
        print(f"mutants: planted bugs no test catches: {'; '.join(alive)}", file=sys.stderr)
    if any(o.broken for o in outcomes):
        print("mutants: some tests could not run (BROKEN above; --show prints them)", file=sys.stderr)
        return 2
    return 0 if score >= MIN_SCORE and not alive else 1


if __name__ == "__main__":
    sys.exit(main())
