"""Where the shared third-party data lies: ``../shared/data`` beside the checkout (tests skip without it)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
