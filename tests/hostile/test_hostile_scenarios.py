"""Hostile scenario files: every one is refused by ``validate`` and ``simulate`` alike, with one line
naming the file, the line, the field and what was expected (exit 2, no traceback, in time and memory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile._cli import assert_user_error

SINGLE = """\
topology: {kind: single_link, capacity_bps: 8.0e9}
priority_levels: 8
policy: static
horizon_s: 60
seed: 0
mode: exact
jobs:
  - {id: a, gpus: 10, compute_s: 2.0, comm_bytes: 2.0e9, overlap: 1.0, priority: 0}
  - {id: b, gpus: 10, compute_s: 1.0, comm_bytes: 1.0e9, overlap: 1.0, priority: 1}
"""

CLOS = """\
topology: {kind: two_layer_clos, tors: 2, aggs: 2, hosts_per_tor: 2}
policy: ecmp-fair
horizon_s: 60
jobs:
  - {id: a, model: resnet50, gpus: 8}
  - {id: b, model: bert-base, hosts: [h1, h2]}
"""

# (case id, base text, (old, new) replacement, fragment of the one error line)
CASES: list[tuple[str, str, tuple[str, str], str]] = [
    # numbers: infinite, overflowing, NaN, out of range, booleans and strings where numbers are meant
    (
        "horizon-inf",
        SINGLE,
        ("horizon_s: 60", "horizon_s: .inf"),
        ":4: horizon_s: input should be a finite number",
    ),
    (
        "horizon-overflow",
        SINGLE,
        ("horizon_s: 60", "horizon_s: 1e999"),
        ":4: horizon_s: input should be a finite",
    ),
    ("horizon-nan", SINGLE, ("horizon_s: 60", "horizon_s: .nan"), ":4: horizon_s:"),
    (
        "horizon-1e300",
        SINGLE,
        ("horizon_s: 60", "horizon_s: 1.0e300"),
        ":4: horizon_s: input should be less than",
    ),
    (
        "horizon-zero",
        SINGLE,
        ("horizon_s: 60", "horizon_s: 0"),
        ":4: horizon_s: input should be greater than 0",
    ),
    (
        "horizon-bool",
        SINGLE,
        ("horizon_s: 60", "horizon_s: true"),
        ":4: horizon_s: input should be a valid number",
    ),
    (
        "horizon-string",
        SINGLE,
        ("horizon_s: 60", 'horizon_s: "60"'),
        ":4: horizon_s: input should be a valid number",
    ),
    (
        "compute-inf",
        SINGLE,
        ("compute_s: 2.0", "compute_s: .inf"),
        ":8: jobs[0].compute_s: input should be a finite",
    ),
    (
        "compute-overflow",
        SINGLE,
        ("compute_s: 2.0", "compute_s: 2e400"),
        "jobs[0].compute_s: input should be a finite",
    ),
    (
        "compute-negative",
        SINGLE,
        ("compute_s: 2.0", "compute_s: -2"),
        "jobs[0].compute_s: input should be greater than 0",
    ),
    (
        "compute-zero",
        SINGLE,
        ("compute_s: 2.0", "compute_s: 0"),
        "jobs[0].compute_s: input should be greater than 0",
    ),
    (
        "bytes-inf",
        SINGLE,
        ("comm_bytes: 2.0e9", "comm_bytes: .inf"),
        "jobs[0].comm_bytes: input should be a finite",
    ),
    (
        "bytes-overflow",
        SINGLE,
        ("comm_bytes: 2.0e9", "comm_bytes: 1e309"),
        "jobs[0].comm_bytes: input should be a finite",
    ),
    ("bytes-nan", SINGLE, ("comm_bytes: 2.0e9", "comm_bytes: .nan"), "jobs[0].comm_bytes:"),
    (
        "bytes-negative",
        SINGLE,
        ("comm_bytes: 2.0e9", "comm_bytes: -1"),
        "jobs[0].comm_bytes: input should be greater",
    ),
    (
        "overlap-above-1",
        SINGLE,
        ("overlap: 1.0, priority: 0", "overlap: 1.5, priority: 0"),
        "jobs[0].overlap:",
    ),
    ("overlap-nan", SINGLE, ("overlap: 1.0, priority: 0", "overlap: .nan, priority: 0"), "jobs[0].overlap:"),
    (
        "arrival-inf",
        SINGLE,
        ("priority: 0}", "priority: 0, arrival_s: .inf}"),
        "jobs[0].arrival_s: input should be a finite",
    ),
    (
        "arrival-negative",
        SINGLE,
        ("priority: 0}", "priority: 0, arrival_s: -1}"),
        "jobs[0].arrival_s: input should be greater",
    ),
    ("arrival-after-horizon", SINGLE, ("priority: 0}", "priority: 0, arrival_s: 60}"), "it can never run"),
    (
        "gpus-bool",
        SINGLE,
        ("gpus: 10, compute_s: 2.0", "gpus: true, compute_s: 2.0"),
        "jobs[0].gpus: input should be a valid integer",
    ),
    (
        "gpus-float",
        SINGLE,
        ("gpus: 10, compute_s: 2.0", "gpus: 2.5, compute_s: 2.0"),
        "jobs[0].gpus: input should be a valid integer",
    ),
    (
        "gpus-zero",
        SINGLE,
        ("gpus: 10, compute_s: 2.0", "gpus: 0, compute_s: 2.0"),
        "jobs[0].gpus: input should be greater",
    ),
    (
        "gpus-negative",
        SINGLE,
        ("gpus: 10, compute_s: 2.0", "gpus: -4, compute_s: 2.0"),
        "jobs[0].gpus: input should be greater",
    ),
    (
        "gpus-string",
        SINGLE,
        ("gpus: 10, compute_s: 2.0", 'gpus: "10", compute_s: 2.0'),
        "jobs[0].gpus: input should be a valid integer",
    ),
    (
        "priority-too-low-class",
        SINGLE,
        ("priority: 1}", "priority: 8}"),
        "jobs[1].priority: priority 8 with 8 priority levels (expected 0 .. 7",
    ),
    (
        "priority-negative",
        SINGLE,
        ("priority: 1}", "priority: -1}"),
        "jobs[1].priority: input should be greater",
    ),
    (
        "priority-bool",
        SINGLE,
        ("priority: 1}", "priority: true}"),
        "jobs[1].priority: input should be a valid integer",
    ),
    ("priority-levels-zero", SINGLE, ("priority_levels: 8", "priority_levels: 0"), ":2: priority_levels:"),
    (
        "priority-levels-huge",
        SINGLE,
        ("priority_levels: 8", "priority_levels: 100000"),
        ":2: priority_levels:",
    ),
    (
        "seed-negative",
        SINGLE,
        ("seed: 0", "seed: -1"),
        ":5: seed: input should be greater than or equal to 0",
    ),
    ("seed-bool", SINGLE, ("seed: 0", "seed: true"), ":5: seed: input should be a valid integer"),
    ("seed-float", SINGLE, ("seed: 0", "seed: 1.5"), ":5: seed: input should be a valid integer"),
    (
        "seed-huge",
        SINGLE,
        ("seed: 0", "seed: 99999999999999999999999"),
        ":5: seed: input should be less than",
    ),
    ("warmup-inf", SINGLE, ("seed: 0", "seed: 0\nwarmup_s: .inf"), "warmup_s: input should be a finite"),
    (
        "warmup-at-horizon",
        SINGLE,
        ("seed: 0", "seed: 0\nwarmup_s: 60"),
        "warmup_s: warm-up 60.0 s is not before the horizon",
    ),
    (
        "iterations-zero",
        SINGLE,
        ("priority: 0}", "priority: 0, iterations: 0}"),
        "jobs[0].iterations: input should be greater",
    ),
    (
        "iterations-bool",
        SINGLE,
        ("priority: 0}", "priority: 0, iterations: true}"),
        "jobs[0].iterations: input should be a valid integer",
    ),
    (
        "iterations-overflow",
        SINGLE,
        ("priority: 0}", "priority: 0, iterations: 1e999}"),
        "jobs[0].iterations:",
    ),
    (
        "duration-inf",
        SINGLE,
        ("priority: 0}", "priority: 0, duration_s: .inf}"),
        "jobs[0].duration_s: input should be a finite",
    ),
    (
        "duration-negative",
        SINGLE,
        ("priority: 0}", "priority: 0, duration_s: -3}"),
        "jobs[0].duration_s: input should be greater",
    ),
    (
        "backfill-string",
        SINGLE,
        ("seed: 0", "seed: 0\nbackfill: 'yes'"),
        "backfill: input should be a valid boolean",
    ),
    (
        "backfill-int",
        SINGLE,
        ("seed: 0", "seed: 0\nbackfill: 1"),
        "backfill: input should be a valid boolean",
    ),
    (
        "capacity-inf",
        SINGLE,
        ("capacity_bps: 8.0e9", "capacity_bps: .inf"),
        ":1: topology.capacity_bps: not a finite number",
    ),
    (
        "capacity-overflow",
        SINGLE,
        ("capacity_bps: 8.0e9", "capacity_bps: 8e999"),
        "topology.capacity_bps: not a finite number",
    ),
    ("capacity-negative", SINGLE, ("capacity_bps: 8.0e9", "capacity_bps: -1"), "topology.capacity_bps:"),
    (
        "capacity-tiny",
        SINGLE,
        ("capacity_bps: 8.0e9", "capacity_bps: 1.0e-300"),
        "topology.capacity_bps: 1e-300 bit/s (expected at least 1 bit/s)",
    ),
    ("capacity-bool", SINGLE, ("capacity_bps: 8.0e9", "capacity_bps: true"), "topology.capacity_bps:"),
    ("mode-unknown", SINGLE, ("mode: exact", "mode: turbo"), ":6: mode: input should be 'exact' or 'fast'"),
    ("policy-unknown", SINGLE, ("policy: static", "policy: statik"), ":3: policy: unknown policy 'statik'"),
    ("policy-markup", SINGLE, ("policy: static", "policy: '[bold]x[/]'"), "unknown policy '[bold]x[/]'"),
    ("duplicate-job-id", SINGLE, ("id: b", "id: a"), "jobs[1].id: duplicate job id 'a'"),
    ("unknown-field", SINGLE, ("priority: 0}", "priority: 0, gpu: 3}"), "jobs[0].gpu: unknown field"),
    ("unknown-top-field", SINGLE, ("seed: 0", "seed: 0\nhorizon: 5"), "horizon: unknown field"),
    (
        "topology-kind",
        SINGLE,
        ("kind: single_link", "kind: tree"),
        "topology.kind: unknown topology kind 'tree'",
    ),
    (
        "topology-param",
        SINGLE,
        ("capacity_bps: 8.0e9", "capacity_bps: 8.0e9, speed: 3"),
        "unknown parameter 'speed'",
    ),
    ("no-model-no-compute", SINGLE, ("compute_s: 2.0, ", ""), "job 'a' has no model and no compute_s"),
    (
        "collective-unknown",
        SINGLE,
        ("priority: 0}", "priority: 0, collective: gossip}"),
        "unknown collective 'gossip'",
    ),
    (
        "cpu-machines-negative",
        SINGLE,
        ("priority: 0}", "priority: 0, cpu_machines: -1}"),
        "jobs[0].cpu_machines:",
    ),
    (
        "ps-without-cpus",
        SINGLE,
        ("priority: 0}", "priority: 0, sync: ps}"),
        "a parameter-server job without CPU machines",
    ),
    ("sync-unknown", SINGLE, ("priority: 0}", "priority: 0, sync: gossip}"), "jobs[0].sync:"),
    (
        "job-not-mapping",
        SINGLE,
        ("  - {id: b, gpus: 10, compute_s: 1.0, comm_bytes: 1.0e9, overlap: 1.0, priority: 1}", "  - 5"),
        "a job must be a mapping",
    ),
    ("horizon-missing", SINGLE, ("horizon_s: 60\n", ""), "horizon_s: field required"),
    # explicit placement and cluster capacity
    (
        "gpus-beyond-cluster",
        CLOS,
        ("gpus: 8}", "gpus: 10000}"),
        "jobs[0].gpus: 10000 GPUs asked, the cluster has 32",
    ),
    ("unknown-host", CLOS, ("hosts: [h1, h2]", "hosts: [h1, h99]"), "jobs[1].hosts[1]: unknown host 'h99'"),
    (
        "unknown-gpu",
        CLOS,
        ("hosts: [h1, h2]", "gpu_ids: [h1/gpu99]"),
        "jobs[1].gpu_ids: unknown GPU(s) h1/gpu99",
    ),
    ("host-twice", CLOS, ("hosts: [h1, h2]", "hosts: [h1, h1]"), "a host is listed twice"),
    (
        "gpus-per-host-too-many",
        CLOS,
        ("hosts: [h1, h2]", "hosts: [h1, h2], gpus_per_host: 9"),
        "jobs[1].gpus_per_host: 9 GPUs asked",
    ),
    ("tors-huge", CLOS, ("tors: 2", "tors: 100000"), "topology.tors: 100000 is larger than the limit"),
    (
        "fabric-huge",
        CLOS,
        ("tors: 2", "tors: 10000"),
        "topology.tors: the fabric would have about 20,000 hosts",
    ),
    ("tors-bool", CLOS, ("tors: 2", "tors: true"), "topology.tors:"),
    (
        "uplink-inf",
        CLOS,
        ("hosts_per_tor: 2}", "hosts_per_tor: 2, uplink_bps: .inf}"),
        "topology.uplink_bps: not a finite number",
    ),
    # traces
    (
        "trace-too-many-jobs",
        CLOS,
        ("jobs:\n", "trace: {kind: synthetic, jobs: 100000000}\njobs:\n"),
        "trace.jobs: 100,000,000 jobs asked",
    ),
    (
        "trace-inf",
        CLOS,
        ("jobs:\n", "trace: {kind: synthetic, jobs: 10, days: .inf}\njobs:\n"),
        "trace.days: not a finite number",
    ),
    (
        "trace-dev-zero",
        CLOS,
        ("jobs:\n", "trace: {kind: tiresias, path: /dev/zero}\njobs:\n"),
        "is not a regular file",
    ),
    (
        "trace-missing-file",
        CLOS,
        ("jobs:\n", "trace: {kind: tiresias, path: nowhere.csv}\njobs:\n"),
        "trace.path: no such file",
    ),
    (
        "trace-max-jobs-bool",
        CLOS,
        ("jobs:\n", "trace: {kind: synthetic, jobs: 10, max_jobs: true}\njobs:\n"),
        "trace.max_jobs:",
    ),
    (
        "trace-scale-inf",
        CLOS,
        ("jobs:\n", "trace: {kind: synthetic, jobs: 10, compute_scale: .inf}\njobs:\n"),
        "trace.compute_scale:",
    ),
    (
        "trace-kind",
        CLOS,
        ("jobs:\n", "trace: {kind: borg}\njobs:\n"),
        "trace.kind: unknown trace kind 'borg'",
    ),
    # runaway work: refused up front with an estimate and a hint
    (
        "nanosecond-iterations",
        SINGLE,
        ("compute_s: 2.0", "compute_s: 1.0e-9"),
        "an exact simulation would step through about",
    ),
    (
        "ten-year-horizon",
        SINGLE,
        ("horizon_s: 60", "horizon_s: 3.0e8"),
        "use --mode fast, a shorter horizon_s",
    ),
]


def _write(tmp_path: Path, base: str, old: str, new: str) -> Path:
    assert old in base, old
    path = tmp_path / "s.yaml"
    path.write_text(base.replace(old, new, 1), encoding="utf-8")
    return path


@pytest.mark.parametrize(("case", "base", "edit", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_validate_and_simulate_refuse_alike(
    tmp_path: Path, case: str, base: str, edit: tuple[str, str], fragment: str
) -> None:
    path = _write(tmp_path, base, *edit)
    line = assert_user_error(["validate", str(path)], fragment)
    assert str(path) in line, line
    assert assert_user_error(["simulate", str(path)], fragment) == line


def test_the_bases_are_valid(tmp_path: Path) -> None:
    from tests.hostile._cli import run

    for base in (SINGLE, CLOS):
        path = tmp_path / "ok.yaml"
        path.write_text(base, encoding="utf-8")
        out = run(["validate", str(path)])
        assert out.exit_code == 0, out.stderr
