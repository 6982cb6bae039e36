"""``trace: {kind: slurm}``: sacct --parsable2 output read, mapped onto models, bad rows refused by line."""

from __future__ import annotations

import datetime as dt
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from commsched.errors import InputError
from commsched.workload.traces.slurm import expand_hostlist, load_slurm_trace

HEAD = "JobID|JobName|Submit|Start|End|AllocTRES|NodeList|State|Comment"
F = "%Y-%m-%dT%H:%M:%S"


def _synthetic(path: Path, n: int, seed: int = 3) -> list[tuple[str, int, float, float, tuple[str, ...]]]:
    """A sacct file of ``n`` jobs (plus their .batch/.extern steps); what each job is, written alongside."""
    r = random.Random(seed)
    t0 = dt.datetime(2026, 11, 1)
    rows, want = [HEAD], []
    for i in range(n):
        sub = t0 + dt.timedelta(seconds=r.randrange(0, 30 * 86400))
        st = sub + dt.timedelta(seconds=r.randrange(0, 600))
        dur = r.randrange(60, 36000)
        en = st + dt.timedelta(seconds=dur)
        g = r.choice([1, 2, 4, 8, 16, 32])
        nodes = max(1, g // 8)
        first = r.randrange(0, 100)
        names = tuple(f"gpu{k:03d}" for k in range(first, first + nodes))
        nl = f"gpu[{first:03d}-{first + nodes - 1:03d}]" if nodes > 1 else names[0]
        job = str(5000 + i)
        tres = f"billing={g},cpu={g * 8},gres/gpu={g},mem=64G,node={nodes}"
        rows.append(f"{job}|job-{i}|{sub:{F}}|{st:{F}}|{en:{F}}|{tres}|{nl}|COMPLETED|")
        rows.append(
            f"{job}.batch|batch|{sub:{F}}|{st:{F}}|{en:{F}}|cpu=8,mem=64G,node=1|{names[0]}|COMPLETED|"
        )
        want.append((job, g, sub.timestamp(), float(dur), names))
    path.write_text("\n".join(rows) + "\n")
    return want


def test_ten_thousand_rows_read_and_validated_quickly(tmp_path: Path) -> None:
    f = tmp_path / "sacct.txt"
    want = _synthetic(f, 10_000)
    t0 = time.process_time()
    trace = load_slurm_trace(f)
    took = time.process_time() - t0
    assert took < 10, f"{took:.2f} CPU-s"
    first = min(w[2] for w in want)
    got = {j.id: j for j in trace.jobs}
    assert len(got) == 10_000
    for job, g, sub, dur, names in want:
        j = got[job]
        assert (j.gpus, j.arrival_s, j.duration_s, j.hosts) == (g, sub - first, dur, names)
        assert j.model == "bert-base"  # no comment, a name no family has: the default


def test_models_by_comment_name_then_default(tmp_path: Path) -> None:
    f = tmp_path / "s.txt"
    t = "2026-11-01T00:00:00|2026-11-01T00:00:00|2026-11-01T00:10:00|gres/gpu=8|n1"
    f.write_text(
        f"{HEAD}\n1|llama-70b|{t}|COMPLETED|\n2|x|{t}|COMPLETED|commsched: model=resnet50\n"
        f"3|ResNet18-cifar|{t}|CANCELLED by 0|\n4|weird|{t}|TIMEOUT|\n"
        f"5|p|2026-11-01T00:00:00|Unknown|Unknown|gres/gpu=8|None assigned|PENDING|\n"
        f"6|cpu|{t.replace('gres/gpu=8', 'cpu=4')}|COMPLETED|\n"
    )
    trace = load_slurm_trace(f, default_model="gnmt")
    assert [(j.id, j.model) for j in trace.jobs] == [
        ("1", "gpt3-crux"),
        ("2", "resnet50"),
        ("3", "resnet18"),
        ("4", "gnmt"),
    ]
    assert any("never ran" in n for n in trace.notes) and any("no GPU" in n for n in trace.notes)


@pytest.mark.parametrize(
    ("row", "where"),
    [
        ("9|a|2026-11-01T00:00:00|2026-11-01T00:00:09|2026-11-01T00:00:05|gres/gpu=1|n1|COMPLETED|", "End"),
        ("9|a|2026-11-01 00:00|2026-11-01T00:00:09|2026-11-01T00:00:15|gres/gpu=1|n1|COMPLETED|", "Submit"),
        (
            "9|a|2026-11-01T00:00:00|2026-11-01T00:00:09|2026-11-01T00:00:15|gres/gpu=x|n1|COMPLETED|",
            "AllocTRES",
        ),
        (
            "9|a|2026-11-01T00:00:00|2026-11-01T00:00:09|2026-11-01T00:00:15|gres/gpu=1|n[1-|COMPLETED|",
            "NodeList",
        ),
        (
            "9|a|2026-11-01T00:00:00|2026-11-01T00:00:09|2026-11-01T00:00:15|gres/gpu=1|n1|COMPLETED|model=nope",
            "Comment",
        ),
        (
            "abc|a|2026-11-01T00:00:00|2026-11-01T00:00:09|2026-11-01T00:00:15|gres/gpu=1|n1|COMPLETED|",
            "JobID",
        ),
        ("9|a|2026-11-01T00:00:00|2026-11-01T00:00:09|2026-11-01T00:00:15|gres/gpu=1|n1|COMPLETED", ""),
    ],
)
def test_bad_row_refused_with_its_line(tmp_path: Path, row: str, where: str) -> None:
    f = tmp_path / "s.txt"
    ok = "8|a|2026-11-01T00:00:00|2026-11-01T00:00:01|2026-11-01T00:00:05|gres/gpu=1|n1|COMPLETED|"
    f.write_text(f"{HEAD}\n{ok}\n\n{row}\n")
    with pytest.raises(InputError) as e:
        load_slurm_trace(f)
    assert e.value.where.startswith(f"{f}:4"), e.value.where  # the blank line counts: line 4
    assert e.value.where.endswith(where)


def test_hostlists() -> None:
    assert expand_hostlist("a[08-10],b,c[1,3-4]x") == ("a08", "a09", "a10", "b", "c1x", "c3x", "c4x")
    for bad in ("a[1-", "a]1", "a[3-1]", "a,,b", "a[x]"):
        with pytest.raises(ValueError):
            expand_hostlist(bad)


def test_simulate_refuses_a_bad_row_in_one_line(tmp_path: Path) -> None:
    f = tmp_path / "s.txt"
    f.write_text(
        f"{HEAD}\n1|a|2026-11-01T00:00:00|2026-11-01T00:00:09|2026-11-01T00:00:01|gres/gpu=1|n1|X|\n"
    )
    sc = tmp_path / "s.yaml"
    sc.write_text(
        f"topology: {{kind: two_layer_clos, tors: 2, aggs: 2}}\npolicy: ecmp-fair\nhorizon_s: 3600\n"
        f"trace: {{kind: slurm, path: {f}}}\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", "from commsched.cli.app import main; main()", "simulate", str(sc)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and f"{f}:2: End" in lines[0], done.stderr
