"""One home each: the job's period and the daemon's profile body are computed in one module each."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import REPO

SRC = REPO / "src" / "commsched"
BODY_KEYS = {"compute_s", "comm_bytes", "period_s"}


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(), filename=str(p))) for p in sorted(SRC.rglob("*.py"))]


def test_the_profile_body_is_built_in_one_module() -> None:
    """A dict literal with the body's keys (or a call building one with them) lives only in
    ``runtime/profiling/body.py``."""
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            keys: set[str] = set()
            if isinstance(node, ast.Dict):
                keys = {
                    k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
                }
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
                keys = {k.arg for k in node.keywords if k.arg}
            if keys >= BODY_KEYS:
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert len(found) == 1 and found[0].startswith("runtime/profiling/body.py:"), found


def test_the_period_is_estimated_and_corrected_in_one_module() -> None:
    """The spectrum (``np.fft``) and the harmonic correction live only in the runtime's profiler."""
    fft, defs = [], []
    for path, tree in _modules():
        rel = str(path.relative_to(SRC))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "fft":
                fft.append(rel)
            if isinstance(node, ast.FunctionDef) and node.name in {
                "fundamental",
                "job_period",
                "iteration_period",
            }:
                defs.append(rel)
    assert set(fft) == {"runtime/profiling/profiler.py"}
    assert set(defs) == {"runtime/profiling/profiler.py"}
