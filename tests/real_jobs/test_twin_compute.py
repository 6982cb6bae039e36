"""The compute a command job's twin gets from its hosts' silences, on recorded testbed windows.

``data/quad-*``: the byte counters of the two hosts of a gloo DDP job of four ranks, two per host, whose
program computes 0.2 s per iteration (``--compute-s 0.2``), over a 12 s profiling window at the top class.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from commsched.experiments.testbed_run.twin_profile import twin_profile
from commsched.runtime.launch.jobs import CommandJob, Rank
from commsched.topology import NodeId

from .views import host_view

DATA = Path(__file__).parent / "data"


def _recorded(name: str) -> dict[str, Any]:
    return dict(json.loads(gzip.decompress((DATA / f"{name}-starved-window.json.gz").read_bytes())))


def _job(hosts: list[str], per_host: int) -> CommandJob:
    ranks = tuple(
        Rank(rank=i * per_host + k, local_rank=k, host=h, gpu=NodeId(f"{h}/gpu{k}"), ip=f"10.9.{i}.{k + 1}",
             iface="eth0")
        for i, h in enumerate(hosts)
        for k in range(per_host)
    )  # fmt: skip
    return CommandJob(
        id="quad", argv=("x",), ranks=ranks, local_world=per_host, master_port=1, iteration_log=None,
        compute_s=1.0, sync_bytes=1.0, overlap=1.0, collective="ring", declared=False,
    )  # fmt: skip


def _pair_decision(job: CommandJob, hosts: list[str]) -> dict[str, Any]:
    """A decision for a ring of two hosts: one connection each way, each carrying the gradients once."""
    return {
        "connections": [
            {"job": job.id, "src": f"{a}/gpu0", "dst": f"{b}/gpu0", "share": 1.0}
            for a, b in (hosts, hosts[::-1])
        ]
    }


def _posted_ring(name: str) -> tuple[dict[str, Any], CommandJob, dict[str, Any], dict[str, Any]]:
    """A recorded ring (one rank per host, ranks in the hosts' order) whose agent posted a profile:
    the document, the job, a decision whose connections leave each host with the ring's share of
    the gradients, ``2 (n - 1) / n``, and the hosts' data as the twin reads them."""
    doc = dict(json.loads(gzip.decompress((DATA / f"{name}.json.gz").read_bytes())))
    hosts = list(doc["hosts"])
    job = _job(hosts, 1)
    share = 2 * (len(hosts) - 1) / len(hosts)
    ring = list(zip(hosts, hosts[1:] + hosts[:1], strict=True))
    decision = {
        "connections": [
            {"job": job.id, "src": f"{a}/gpu0", "dst": f"{b}/gpu0", "share": share} for a, b in ring
        ]
    }
    data = {
        h: {"report": {"profile": {"posted": doc["posted"], "window": doc["window"]}}, "traffic": tr}
        for h, tr in doc["hosts"].items()
    }
    return doc, job, decision, data


def _data(doc: dict[str, Any]) -> dict[str, Any]:
    window = [float(doc["profiling_start"]), 0.0]
    posted = {"compute_s": 0.0, "comm_bytes": 1.0, "overlap": 1.0}
    return {
        h: {"report": {"profile": {"posted": posted, "window": window}}, "traffic": tr}
        for h, tr in doc["hosts"].items()
    }


@pytest.mark.parametrize("name", ["quad", "quad-merged"])
def test_a_host_running_two_ranks_gives_the_compute_of_the_bytes_it_receives(name: str) -> None:
    """A host that runs two of the ring's ranks sends from one and receives on the other, whose
    iterations end apart: the silence of its sends and receives together is short by that skew (the
    twin computed 0.15-0.17 s and ran 14 % fast), the silence of its received bytes is the program's
    0.2 s. The same counters read as hosts of one rank each keep the silence of both directions."""
    doc = _recorded(name)
    hosts = list(doc["hosts"])
    two = twin_profile(_job(hosts, 2), _data(doc), {}, end=0.0)
    one = twin_profile(_job(hosts, 1), _data(doc), {}, end=0.0)
    assert two["compute_from"] == "silence between iterations"
    assert one["compute_from"].startswith("silence between iterations")
    assert two["compute_s"] == pytest.approx(0.2, abs=0.02)
    assert one["compute_s"] < 0.18


def test_a_profile_computed_at_the_end_takes_the_bytes_of_its_hosts_own_connections() -> None:
    """``data/duo-rejected-window``: the byte counters of the two hosts of a gloo DDP job of two
    ranks (``--dim 768``: two 768x768 layers and their biases, 4,724,736 bytes of gradients, all of
    which each rank of a ring of two sends per iteration), recorded under crux-full where the agent
    kept its profile back (its window's iterations were not told apart by bytes). The profile computed
    at the end reads the first host's counter, so the job's bytes are that host's over the share of
    the connections that leave it (1.0 here), not over both directions' (the twin got half the bytes
    and ran 44 % fast)."""
    doc = dict(json.loads(gzip.decompress((DATA / "duo-rejected-window.json.gz").read_bytes())))
    hosts = list(doc["hosts"])
    job = _job(hosts, 1)
    decision = _pair_decision(job, hosts)
    data = {
        h: {"report": {"profile": {"rejected": doc["rejected"]}}, "traffic": tr}
        for h, tr in doc["hosts"].items()
    }
    gradients = 2 * (768 * 768 + 768) * 4
    end = float(doc["profiling_end"])
    prof = twin_profile(job, data, decision, end=end, until=float(doc["until"]))
    assert prof["from"] == "measuring window, computed at the end"  # iterations split by bytes there
    assert prof["profiling_window"] == "not used: no split by bytes"
    assert prof["comm_bytes"] == pytest.approx(gradients, rel=0.03)
    assert prof["compute_s"] == pytest.approx(0.2, abs=0.02)
    # a measuring window of 3 s (three iterations) tells nothing apart: both windows together
    both = twin_profile(job, data, decision, end=end, until=end + 3.0)
    assert both["from"] == "profiling and measuring windows, computed at the end"
    assert both["comm_bytes"] == pytest.approx(gradients, rel=0.03)
    assert both["compute_s"] == pytest.approx(0.2, abs=0.02)


def test_in_a_starved_profiling_window_only_the_hosts_whose_iterations_split_by_bytes_give_the_compute() -> (
    None
):
    """``data/trio-starved-profiling-window``: the three hosts of a ring of three (``--compute-s 0.2``)
    over the 9.6 s profiling window its agent posted from, under crux-full, starved by the higher
    classes (1.39 s per iteration; the agent posted the silent time per iteration, 0.98 s, as its
    compute). Two hosts' iterations are told apart by their bytes, the third's are not (its stalled
    bursts look like iterations): the compute is the silence between iterations of the two (before,
    the silent time per iteration of all three, waits included: 0.35 s, the twin 19 % slow)."""
    doc = dict(json.loads(gzip.decompress((DATA / "trio-starved-profiling-window.json.gz").read_bytes())))
    hosts = list(doc["hosts"])
    job = _job(hosts, 1)
    data = {
        h: {"report": {"profile": {"posted": doc["posted"], "window": doc["window"]}}, "traffic": tr}
        for h, tr in doc["hosts"].items()
    }
    prof = twin_profile(job, data, {}, end=float(doc["window"][1]))
    assert doc["posted"]["compute_s"] > 0.9  # what the agent measured: the starved window's waits
    assert prof["compute_from"] == "silence between iterations, stalled window"
    assert len(prof["compute_by_host"]) == 2
    assert prof["compute_s"] == pytest.approx(0.2, abs=0.03)


def test_a_profiling_window_the_job_was_starved_in_gives_way_to_a_clean_measuring_window() -> None:
    """``data/trio-mixed-profiling-window``: the three hosts of a ring of three (``--dim 512``,
    ``--compute-s 0.2``) under crux-full, from the 9.6 s its agent posted from to the end of the 30 s
    measuring window. The ring ran at its own speed (0.58 s per iteration) for 4 s, was starved
    (1.25 s) for 12 s while the daemon's classes settled, and ran in class 0 from then on: the
    posted profile's compute comes from a stalled window (0.355 s, twin 21 % slow). The measuring
    window's iterations stand apart by their bytes and do not stall: its profile is the program's,
    2 x (512 x 512 + 512) x 4 bytes of gradients (of which a rank of a ring of three sends 4/3 per
    iteration) and 0.2 s of compute."""
    doc, job, decision, data = _posted_ring("trio-mixed-profiling-window")
    end, until = float(doc["profiling_end"]), float(doc["until"])
    kept = twin_profile(job, data, decision, end=end)  # no measuring window: the posted profile
    assert kept["from"] == "posted by the agent" and kept["compute_s"] > 0.3
    prof = twin_profile(job, data, decision, end=end, until=until)
    assert prof["from"] == "measuring window, computed at the end"
    assert prof["profiling_window"] == "not used: silence between iterations, stalled window"
    assert prof["compute_s"] == pytest.approx(0.2, abs=0.025)
    assert prof["comm_bytes"] == pytest.approx(2 * (512 * 512 + 512) * 4, rel=0.03)


def test_the_agent_posts_the_silence_between_iterations_of_a_stalled_window() -> None:
    """The same recorded window, profiled by the agent of the ring's first host as it was in the run:
    the host's silent time per iteration (0.98 s, waits for the stalled peers included) stays in the
    measured profile, the compute posted to the daemon is the host's silence between iterations
    (0.22 s; the program computes 0.2 s). Before, 0.98 s was posted: a starved job looked less
    communication-bound than it is to the policy that ranks jobs by it."""
    import threading
    from types import SimpleNamespace

    from commsched.runtime.enforce import loops

    doc = dict(json.loads(gzip.decompress((DATA / "trio-starved-profiling-window.json.gz").read_bytes())))
    host = next(iter(doc["hosts"]))
    tr = doc["hosts"][host]
    posted: list[dict[str, Any]] = []
    e = SimpleNamespace(
        lock=threading.Lock(),
        cfg=SimpleNamespace(sample_s=float(tr["sample_s"]), host=host),
        view=host_view(
            host, [("trio", 1.0)], {"trio": ([f"{h}/gpu0" for h in doc["hosts"]], list(doc["hosts"]))}
        ),
        poster=lambda job, body: posted.append(body) or {"status": 200},
    )
    t, tx, rx = tr["t"], tr["data_bytes"], tr["rx_data_bytes"]
    samples = list(zip(t, tx, tx, [0] * len(t), rx, strict=True))
    job = SimpleNamespace(id="trio", samples=samples, profile=None)
    out = loops.profile_now(e, job, float(doc["window"][0]), float(doc["window"][1]))
    assert "rejected" not in out and len(posted) == 1
    assert out["measured"]["compute_s"] > 0.9
    assert posted[0]["compute_s"] == pytest.approx(0.2, abs=0.03)


def test_a_host_of_several_ranks_waiting_on_a_shared_link_does_not_lengthen_the_compute() -> None:
    """``data/quad-contended-window``: the four-rank job (two ranks per host, ``--compute-s 0.2``)
    over its agent's profiling window under ecmp-fair, its ring on an uplink an ECMP collision shares
    with the ring of three. One host's received bytes fall silent for 0.27 s between iterations (the
    sending host's compute and the skew between its two ranks' ends, which the shared link
    lengthens), the other's for 0.19 s; the first's silent time per iteration is 0.37 s, the
    second's 0.20 s. The compute is the program's 0.2 s (before: the longest silence, 0.27 s, and
    the twin 12 % slow)."""
    doc = dict(json.loads(gzip.decompress((DATA / "quad-contended-window.json.gz").read_bytes())))
    hosts = list(doc["hosts"])
    data = {
        h: {"report": {"profile": {"posted": doc["posted"], "window": doc["window"]}}, "traffic": tr}
        for h, tr in doc["hosts"].items()
    }
    prof = twin_profile(_job(hosts, 2), data, {}, end=float(doc["window"][1]))
    assert prof["compute_from"] == "silence between iterations"
    assert max(prof["compute_by_host"].values()) > 0.25  # the waiting host's silence
    assert prof["compute_s"] == pytest.approx(0.2, abs=0.015)


def test_a_profiling_window_that_merged_two_iterations_gives_way_to_the_measuring_window() -> None:
    """``data/trio-merged-profiling-window``: a ring of three (``--dim 512``: 2,101,248 bytes of
    gradients, of which each rank sends 4/3 per iteration) under ecmp-fair, its agent's posted
    profile read two iterations as one (4.22 MB and 1.685 s per iteration; the program logged
    0.846 s). The measuring window's iterations stand apart: the twin gets its bytes."""
    doc, job, decision, data = _posted_ring("trio-merged-profiling-window")
    gradients = 2 * (512 * 512 + 512) * 4
    assert doc["posted"]["comm_bytes"] == pytest.approx(2 * gradients, rel=0.03)
    prof = twin_profile(job, data, decision, end=float(doc["profiling_end"]), until=float(doc["until"]))
    assert prof["from"] == "measuring window, computed at the end"
    assert prof["profiling_window"].endswith("bytes per iteration, not one iteration's")
    assert prof["comm_bytes"] == pytest.approx(gradients, rel=0.03)
    assert prof["compute_s"] == pytest.approx(0.2, abs=0.025)


def test_a_profiling_window_that_read_a_part_of_an_iteration_gives_way_to_the_measuring_window() -> None:
    """``data/duo-part-profiling-window``: a ring of two (``--dim 768``: 4,724,736 bytes of gradients,
    all of which each rank sends per iteration) under crux-full, whose agent's posted profile read
    0.29 of an iteration as one (1.39 MB, 0.64 s; the program logged 0.843 s in class 0): its twin was
    41 % fast and left the ring below it 51 % fast. The measuring window's iterations stand apart."""
    doc, job, decision, data = _posted_ring("duo-part-profiling-window")
    gradients = 2 * (768 * 768 + 768) * 4
    assert doc["posted"]["comm_bytes"] < 0.35 * gradients
    prof = twin_profile(job, data, decision, end=float(doc["profiling_end"]), until=float(doc["until"]))
    assert prof["from"] == "measuring window, computed at the end"
    assert prof["comm_bytes"] == pytest.approx(gradients, rel=0.03)
    assert prof["compute_s"] == pytest.approx(0.2, abs=0.025)


@pytest.mark.parametrize(
    ("name", "follows"),
    [("trio-halved-profiling-window", False), ("trio-starved-measuring-window", True)],
)
def test_the_measuring_window_follows_the_profiling_windows_bytes_unless_the_job_was_starved_there(
    name: str, follows: bool
) -> None:
    """Two ring-of-three runs under crux-full (``--compute-s 0.2``), from the start of the 12 s
    profiling window to the end of the 30 s measuring window, with the lines the program logged.

    ``trio-halved-profiling-window``: the ring was starved for most of its profiling window behind
    a four-rank job of half its period, so its traffic came in two bursts an iteration, and the split
    there read each burst as an iteration; the measuring window followed those bytes and counted
    twice the iterations (0.626 s for 1.252 s logged). A stalled profiling window gives no bytes now.
    ``trio-starved-measuring-window``: the profiling window at the ring's own speed, the measuring
    window starved (1.68 s); there the measuring window's own split reads halves, and the profiling
    window's bytes keep it to whole iterations."""
    from commsched.experiments.testbed_run.command_report import agreed_iterations, profiling_bytes

    doc = dict(json.loads(gzip.decompress((DATA / f"{name}.json.gz").read_bytes())))
    hosts = list(doc["hosts"])
    job = _job(hosts, 1)
    data = {h: {"traffic": tr} for h, tr in doc["hosts"].items()}
    start, end, until = float(doc["start"]), float(doc["profiling_end"]), float(doc["until"])
    times = [t for t, _ in doc["logged"] if end <= t <= until]
    logged = (times[-1] - times[0]) / (len(times) - 1)
    known = profiling_bytes(job, data, start=start, end=end)
    assert (known is not None) is follows
    traffic = [doc["hosts"][h] for h in hosts]
    split = agreed_iterations(traffic, start=end, end=until, known_bytes=known)
    assert split is not None and split["mean"] == pytest.approx(logged, rel=0.05)


@pytest.mark.parametrize("name", ["trio-starved-measuring-split", "trio-collided-measuring-split"])
def test_a_right_posted_profile_is_kept_where_the_measuring_windows_split_fails(name: str) -> None:
    """Two rings of three (2,101,248 bytes of gradients, 4/3 of them sent per rank, ``--compute-s
    0.2``) whose agents posted the program's profile, and whose measuring windows split wrong:
    ``trio-starved-measuring-split`` starved in class 2 under crux-full (two bursts an iteration,
    read as 1.05 MB iterations; the job moved its bytes twice as fast in its profiling window),
    ``trio-collided-measuring-split`` under ecmp-fair on a link an ECMP collision shares (the first
    host read four iterations as one, 8.4 MB, where its peers' periods were the program's). The twin
    keeps the posted profile (before: the first twin 102 % fast)."""
    doc, job, decision, data = _posted_ring(name)
    gradients = 2 * (512 * 512 + 512) * 4
    prof = twin_profile(job, data, decision, end=float(doc["profiling_end"]), until=float(doc["until"]))
    assert prof["from"] == "posted by the agent"
    assert prof["comm_bytes"] == pytest.approx(gradients, rel=0.03)
    assert prof["compute_s"] == pytest.approx(0.2, abs=0.025)
