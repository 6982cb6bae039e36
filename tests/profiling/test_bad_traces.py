"""Bad trace files: one line on stderr, exit code 2, no traceback, and nothing written with --out."""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commsched.cli.app import app
from tests.paths import SHARED_DATA

H200 = SHARED_DATA / "h200-profiles"
CHAKRA = SHARED_DATA / "chakra-traces"
pytestmark = pytest.mark.skipif(not H200.exists(), reason="shared data folder not present")


def _cut(src: Path, frac: float) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        data = src.read_bytes()
        out = d / f"cut-{src.name}"
        out.write_bytes(data[: int(len(data) * frac)])
        return out

    return make


def _plain_cut(d: Path) -> Path:  # a gunzipped trace cut in the middle of an event
    text = gzip.decompress((H200 / "trace-resnet50.json.gz").read_bytes())
    out = d / "cut.json"
    out.write_bytes(text[: len(text) // 2])
    return out


def _malformed(d: Path) -> Path:  # one byte changed in a real trace: a quote becomes a letter
    text = bytearray(gzip.decompress((H200 / "trace-resnet50.json.gz").read_bytes()))
    text[text.index(b'"cat"')] = ord("x")
    out = d / "malformed.json"
    out.write_bytes(bytes(text))
    return out


def _empty(d: Path) -> Path:
    (d / "empty.json").touch()
    return d / "empty.json"


def _empty_gz(d: Path) -> Path:
    (d / "empty.json.gz").write_bytes(gzip.compress(b""))
    return d / "empty.json.gz"


def _huge(d: Path) -> Path:  # a sparse file beyond the default 512 MB bound (no disk used)
    out = d / "huge.json"
    with out.open("wb") as fh:
        fh.truncate(600 * 10**6)
    return out


def _shared(rel: str) -> Callable[[Path], Path]:
    return lambda _: SHARED_DATA / rel


CASES = [
    # (option, input, extra args, text the one line must contain)
    ("--kineto", _cut(H200 / "trace-resnet50.json.gz", 0.5), [], "truncated gzip stream"),
    ("--kineto", _plain_cut, [], "truncated JSON"),
    ("--kineto", _malformed, [], "invalid JSON"),
    ("--kineto", _empty, [], "empty file"),
    ("--kineto", _empty_gz, [], "empty file once decompressed"),
    ("--kineto", _shared("h200-profiles/profiles.json"), [], "not a Kineto trace"),
    ("--kineto", _shared("chakra-traces/chakra.0.et"), [], "not UTF-8"),
    ("--kineto", _shared("chakra-traces/pytorch-et-1.0.2-chakra.0.0.4.json"), [], "not a Kineto trace"),
    ("--kineto", _huge, [], "more than 512,000,000"),
    (
        "--kineto",
        _shared("h200-profiles/trace-resnet50.json.gz"),
        ["--max-bytes", "100kB"],
        "more than 100,000",
    ),
    (
        "--kineto",
        _shared("h200-profiles/trace-resnet50.json.gz"),
        ["--max-bytes", "1MB"],
        "decompresses to more",
    ),
    ("--et", _cut(CHAKRA / "chakra.0.et", 0.5), [], "cut off"),
    ("--et", _cut(CHAKRA / "pytorch-et-1.0.2-chakra.0.0.4.json", 0.7), [], "truncated JSON"),
    ("--et", _empty, [], "empty file"),
    ("--et", _shared("h200-profiles/trace-resnet50.json.gz"), [], "not a PyTorch execution trace"),
    ("--et", _shared("h200-profiles/README.md"), [], "Chakra ET"),
    ("--et", _huge, [], "more than 512,000,000"),
    ("--et", _shared("chakra-traces/chakra.0.et"), ["--max-bytes", "1MB"], "more than 1,000,000"),
    ("--kineto", lambda d: d / "missing.json", [], "no such file"),
    ("--kineto", _shared("h200-profiles/trace-resnet50.json.gz"), ["--max-bytes", "lots"], "--max-bytes"),
]


@pytest.mark.parametrize(("option", "make", "extra", "needle"), CASES, ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_bad_trace_is_one_line_and_writes_nothing(
    tmp_path: Path, option: str, make: Callable[[Path], Path], extra: list[str], needle: str
) -> None:
    src = make(tmp_path)
    out = tmp_path / "out" / "profile.json"
    out.parent.mkdir()
    res = CliRunner().invoke(app, ["profile", option, str(src), *extra, "--out", str(out), "--json"])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], res.stderr
    assert "Traceback" not in res.output and res.stdout == ""
    assert os.listdir(out.parent) == []  # nothing written, not even a temporary file


def test_max_bytes_raises_the_bound(tmp_path: Path) -> None:
    """--max-bytes raises the bound: the 2.9 MB Chakra ET reads under 3MB, not under 2MB."""
    et = str(CHAKRA / "chakra.0.et")
    assert CliRunner().invoke(app, ["profile", "--et", et, "--max-bytes", "2MB", "--json"]).exit_code == 2
    assert CliRunner().invoke(app, ["profile", "--et", et, "--max-bytes", "3MB", "--json"]).exit_code == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([], "exactly one of them"),
        (["x.py:f", "--kineto", "t.json"], "exactly one of them"),
        (["--et", "a", "--kineto", "b"], "exactly one of them"),
    ],
)
def test_inputs_are_exactly_one(args: list[str], needle: str) -> None:
    res = CliRunner().invoke(app, ["profile", *args])
    assert res.exit_code == 2 and needle in res.stderr and "Traceback" not in res.output


def test_out_into_a_missing_folder_is_refused_before_reading(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app, ["profile", "--et", str(CHAKRA / "chakra.0.et"), "--out", str(tmp_path / "no" / "p.json")]
    )
    assert res.exit_code == 2 and "--out" in res.stderr
