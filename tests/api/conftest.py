"""Fixtures of the API tests: the example plug-in package ``mypkg`` installed for the entry-point tests."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

PKG = Path(__file__).parent / "pkg_mypolicy"


@pytest.fixture(scope="session")
def mypkg_installed() -> None:
    """Install ``tests/api/pkg_mypolicy`` (editable) unless ``make setup`` already did; skip if pip cannot."""
    try:
        metadata.distribution("commsched-mypkg")
        return
    except metadata.PackageNotFoundError:
        pass
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(PKG)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot install the example plug-in package: {proc.stderr.strip()[-300:]}")
    import importlib

    importlib.invalidate_caches()
