"""The Lingjun topo.csv loader on the real file and on broken ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from commsched.errors import InputError
from commsched.topology import NodeKind, load_lingjun_topo, oversubscription
from tests.paths import SHARED_DATA

REAL = SHARED_DATA / "alibaba-lingjun-2023" / "topo.csv"


@pytest.mark.skipif(not REAL.exists(), reason="shared Lingjun data not present")
def test_real_file_loads() -> None:
    topo = load_lingjun_topo(REAL)
    assert len(topo.hosts) == 847 and topo.n_gpus == 847 * 8
    assert len(topo.nodes_of_kind(NodeKind.TOR)) == 119  # (PSW, ASW) keys
    assert [n.id for n in topo.nodes_of_kind(NodeKind.AGG)] == ["agg_P10", "agg_P12", "agg_P8"]
    assert len(topo.nodes_of_kind(NodeKind.CORE)) == 1
    first = topo.host_by_label("0c9d9de1b19e7f39b08f49ddfa26744ae26d3adf8bd59af1b16e203b6fa5fe4b")
    assert first.id == "h0" and first.tors == ("tor_P10_S14",)
    assert oversubscription(topo) == pytest.approx(1.0)


@pytest.mark.skipif(not REAL.exists(), reason="shared Lingjun data not present")
def test_real_file_multipath_expansion() -> None:
    topo = load_lingjun_topo(REAL, aggs_per_psw=2, cores_per_dsw=3, host_template="a100_8gpu_4nic")
    a = topo.hosts[0].nics[0]
    far = next(
        h
        for h in topo.hosts
        if not set(h.tors) & set(topo.hosts[0].tors) and h.tors[0].split("_")[1] != "P10"
    )
    assert len(topo.equal_cost_paths(a, far.nics[0])) == 2 * 3 * 2


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "topo.csv"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("ip,DSW,PSW\nx,G6,P1\n", 1, "bad header"),
        ("", 1, "bad header"),
        ("ip,DSW,PSW,ASW\nx1,G6,P1,S1\nx2,G6,P1\n", 3, "bad row"),
        ("ip,DSW,PSW,ASW\nx1,G6,P1,S1\nx2,G6,,S1\n", 3, "bad row"),
        ("ip,DSW,PSW,ASW\nx1,G6,P1,S1\nx2,G6,P1,S2\nx1,G6,P1,S3\n", 4, "duplicate ip"),
        ("ip,DSW,PSW,ASW\nx1,G6,P1,S1\nx2,G7,P1,S2\n", 3, "PSW P1 under DSW G7"),
    ],
)
def test_bad_files_name_file_and_line(tmp_path: Path, text: str, line: int, what: str) -> None:
    p = _write(tmp_path, text)
    with pytest.raises(InputError, match=what) as info:
        load_lingjun_topo(p)
    assert info.value.where == f"{p}:{line}"
    if line == 1:
        assert "ip,DSW,PSW,ASW" in info.value.expected


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_lingjun_topo(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="no hosts"):
        load_lingjun_topo(_write(tmp_path, "ip,DSW,PSW,ASW\n"))


def test_asw_labels_are_unique_only_within_a_psw(tmp_path: Path) -> None:
    topo = load_lingjun_topo(_write(tmp_path, "ip,DSW,PSW,ASW\na,G,P1,S1\nb,G,P2,S1\nc,G,P1,S1\n"))
    assert [n.id for n in topo.nodes_of_kind(NodeKind.TOR)] == ["tor_P1_S1", "tor_P2_S1"]
    assert topo.host_by_label("c").tors == topo.host_by_label("a").tors
