"""``commsched testbed run``: real jobs on the emulated testbed beside the simulator's prediction."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import typer

from commsched.cli.common import print_json, stdout_console, user_errors
from commsched.errors import InputError

_T0 = time.monotonic()


def _load(spec: str) -> tuple[Any, dict[str, Any]]:
    """The scenario (shipped name or file) and its raw ``topology`` mapping (for the daemon)."""
    from commsched.io import yamlio
    from commsched.io.scenario import scenario_from_text
    from commsched.io.shipped import shipped_names, shipped_text

    p = Path(spec)
    if spec in shipped_names() and not p.exists():
        text, where = shipped_text(spec), f"{spec} (shipped)"
    else:
        try:
            text, where = p.read_text(encoding="utf-8"), str(p)
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", where=str(p), expected="a scenario") from None
    scenario = scenario_from_text(text, source=where, measured_commands=True)
    raw = yamlio.load(text)
    topo = raw.get("topology") if isinstance(raw, dict) else None
    if not isinstance(topo, dict) or "kind" not in topo:
        raise InputError("no topology kind", where=f"{where}: topology", expected="a mapping with 'kind'")
    return scenario, dict(topo)


def _progress(line: str) -> None:
    """A progress line on stderr, with the time since the command started."""
    sys.stderr.write(f"[{time.monotonic() - _T0:7.1f} s] {line}\n")
    sys.stderr.flush()


@user_errors
def run(
    scenario: str = typer.Argument(..., help="Scenario (shipped name or YAML); the policy places jobs."),
    policies: str = typer.Option("ecmp-fair,crux-full", "--policies", help="Comma-separated, run in turn."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    name: str | None = typer.Option(None, "--name", "-n", help="Testbed name (default csr + pid)."),
    rate_scale: float | None = typer.Option(
        None, "--rate-scale", help="Link rate factor; default: fastest link -> 125 Mbit/s."
    ),
    window: float = typer.Option(40.0, "--window", min=1.0, help="Measuring window per policy, s."),
    profiling: float = typer.Option(
        12.0, "--profiling-window", min=0.0, help="Top-class profiling window before it, s."
    ),
    post_profiles: bool = typer.Option(
        True,
        "--post-profiles/--declared-profiles",
        help="Jobs post their measured profile to the daemon in the profiling window.",
    ),
    time_scale: float = typer.Option(
        8.0, "--time-scale", min=1.0, help="Run D x slower: compute and bytes x D, times reported / D."
    ),
    calibrate: bool = typer.Option(
        False, "--calibrate/--no-calibrate", help="Twin with the measured per-step latency (alpha)."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Multipath hash seed; default: the scenario's."),
    keep: Path | None = typer.Option(None, "--keep", help="Copy the run's files (logs, results) here."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines on stderr."),
    oracle: str = typer.Option(
        "routes", "--oracle", help="Command jobs' path oracle: routes (the routers') or probe (TTL probes)."
    ),
    segment_bytes: int = typer.Option(
        16384,
        "--segment-bytes",
        help="Largest TCP packet the hosts send (gso_max_size; 1500: MTU frames; 0: the kernel's 64 KB).",
    ),
) -> None:
    """Run every job of SCENARIO as real processes on the testbed, per policy; measured vs simulated."""
    from commsched.catalog import policy_registry
    from commsched.experiments.testbed_run import RunOptions, run_scenario
    from commsched.testbed import netns
    from commsched.testbed.scale import default_rate_scale

    if oracle not in ("routes", "probe"):
        raise InputError(f"bad oracle {oracle!r}", where="--oracle", expected="routes or probe")
    if segment_bytes and not 1500 <= segment_bytes <= 65536:
        raise InputError(
            f"bad segment size {segment_bytes}", where="--segment-bytes", expected="0, or 1500 to 65536 bytes"
        )
    netns.require_capability()
    sc, topo = _load(scenario)
    names = tuple(p.strip() for p in policies.split(",") if p.strip())
    if not names:
        raise InputError("no policy", where="--policies", expected="e.g. ecmp-fair,crux-full")
    for p in names:
        policy_registry().get(p, where="--policies")
    scale = default_rate_scale(sc.topology) / 4 if rate_scale is None else rate_scale
    opts = RunOptions(
        policies=names,
        name=name or f"csr{os.getpid() % 100000}",
        rate_scale=scale,
        profiling_window_s=profiling,
        window_s=window,
        time_scale=time_scale,
        calibrate=calibrate,
        profile_share=0.6 if post_profiles else 0.0,
        seed=seed,
        keep_dir=keep,
        oracle=oracle,
        segment_bytes=segment_bytes,
        progress=None if quiet else _progress,
    )
    report = run_scenario(sc, topo, opts)
    if as_json:
        print_json(report)
        return
    con = stdout_console()
    for pol, body in report["policies"].items():
        u = body["allocated_gpu_utilization"]
        con.print(
            f"{pol}: allocated GPU utilisation measured {u['measured']:.3f}, simulated {u['simulated']:.3f}",
            markup=False,
        )
        for jid, j in body["jobs"].items():
            con.print(
                f"  {jid}: measured {j['measured_iteration_s']:.4f} s, simulated "
                f"{j['simulated_iteration_s']:.4f} s ({j['gap']:+.1%}), class {j['class']}",
                markup=False,
            )
