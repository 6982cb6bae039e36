"""``commsched daemon`` / ``commsched agent``: bad command lines are one-line errors with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from commsched.cli.app import app
from commsched.runtime.http.serving import load_token, parse_listen

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        (["daemon", "--db", "{tmp}/d.db", "--listen", "nowhere"], "--listen: bad address"),
        (["daemon", "--db", "{tmp}/d.db", "--listen", "127.0.0.1:99999"], "--listen: bad address"),
        (["daemon", "--db", "{tmp}/d.db", "--token-file", "{tmp}/missing"], "cannot read the token file"),
        (["daemon", "--db", "{tmp}/d.db", "--policy", "nosuch"], "unknown policy 'nosuch'"),
        (["daemon", "--db", "{tmp}/d.db", "--topology", "nosuch"], "unknown topology kind"),
        (["daemon", "--db", "{tmp}/d.db", "-p", "tors=4"], "--param given without --topology"),
        (["daemon", "--db", "{tmp}/nodir/d.db"], "cannot open the database"),
        (["agent", "--daemon", "localhost:1", "--host", "h0"], "--daemon: bad URL"),
        (
            ["agent", "--daemon", "http://127.0.0.1:1", "--host", "h0", "--ports", "{tmp}/none.json"],
            "cannot read",
        ),
        (["agent", "--daemon", "http://127.0.0.1:1", "--host", "h0", "--nic", "eth0"], "--nic: bad NIC"),
    ],
)
def test_bad_command_lines(tmp_path: Path, args: list[str], msg: str) -> None:
    (tmp_path / "nodir").mkdir()
    (tmp_path / "nodir" / "d.db").mkdir()  # a directory where the database file should be
    res = runner.invoke(app, [a.replace("{tmp}", str(tmp_path)) for a in args])
    assert res.exit_code == 2, res.output
    assert msg in res.stderr and "Traceback" not in res.output
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_token_made_on_first_start_and_kept(tmp_path: Path) -> None:
    fallback = tmp_path / "d.db.token"
    tok, path = load_token(None, fallback=fallback)
    assert path == fallback and len(tok) >= 32 and (fallback.stat().st_mode & 0o777) == 0o600
    assert load_token(None, fallback=fallback)[0] == tok
    (tmp_path / "short").write_text("abc\n")
    with pytest.raises(Exception, match="token too short"):
        load_token(tmp_path / "short", fallback=fallback)
    assert parse_listen("[::1]:80").host == "::1" and parse_listen("unix:/x").loopback
    assert not parse_listen("0.0.0.0:1").loopback
