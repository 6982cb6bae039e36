"""``commsched byteps``: BytePS's optimal traffic split for n GPU and k CPU machines (OSDI'20 §4.1)."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from commsched.cli.cmd_intrajob import ModelLookup, zoo_lookup
from commsched.cli.common import option_names, print_json, stdout_console, user_errors
from commsched.errors import InputError
from commsched.intrajob.byteps import BytePSAssignment, BytePSTimes, byteps_assignment, byteps_times

GBPS = 1e9  # bits/s per Gb/s


def _model_bytes(lookup: ModelLookup, model: str | None, size_bytes: float | None) -> float:
    if (model is None) == (size_bytes is None):
        raise InputError("need exactly one", where="--model/--bytes", expected="a model name or a size")
    if size_bytes is not None:
        return size_bytes
    return float(lookup(str(model)).sync_bytes)


def _report(a: BytePSAssignment, t: BytePSTimes, bandwidth_gbps: float) -> dict[str, Any]:
    gpu, cpu = a.gpu_machine_traffic_bytes, a.cpu_machine_traffic_bytes
    return {
        "gpu_machines": a.gpu_machines,
        "cpu_machines": a.cpu_machines,
        "cpu_machines_used": a.cpu_machines_used,
        "mode": a.mode,
        "model_bytes": a.model_bytes,
        "bandwidth_gbps": bandwidth_gbps,
        "communication_s": t.byteps_s,
        "allreduce_s": t.allreduce_s,
        "ps_s": t.ps_s,
        "assignment": {"ss_gpu_bytes": a.ss_gpu_bytes, "ss_cpu_bytes": a.ss_cpu_bytes, "slots": a.slots},
        "traffic": {
            "gpu_machine": {"sent_bytes": gpu, "received_bytes": gpu},
            "cpu_machine": {"sent_bytes": cpu, "received_bytes": cpu},
        },
        "speedup_vs_allreduce": t.speedup_vs_allreduce,
        "speedup_vs_ps": t.speedup_vs_ps,
    }


def _print(rep: dict[str, Any]) -> None:
    n, k = rep["gpu_machines"], rep["cpu_machines"]
    table = Table(title=f"BytePS, n = {n} GPU and k = {k} CPU machines ({rep['mode']})")
    table.add_column("quantity")
    table.add_column("value")
    table.add_row("communication time (s)", f"{rep['communication_s']:.4g}")
    table.add_row("all-reduce time (s)", f"{rep['allreduce_s']:.4g}")
    table.add_row("PS time (s)", "n/a" if rep["ps_s"] is None else f"{rep['ps_s']:.4g}")
    for kind in ("gpu_machine", "cpu_machine"):
        tr = rep["traffic"][kind]
        label = kind.replace("_", " ")
        table.add_row(f"{label} sent / received (B)", f"{tr['sent_bytes']:.4g} / {tr['received_bytes']:.4g}")
    table.add_row("speed-up vs all-reduce", f"{rep['speedup_vs_allreduce']:.3f}")
    gp = rep["speedup_vs_ps"]
    table.add_row("speed-up vs PS", "n/a" if gp is None else f"{gp:.3f}")
    stdout_console().print(table)


def register(app: typer.Typer, *, get_model: ModelLookup | None = None) -> None:
    """Add ``commsched byteps`` to ``app`` (``get_model`` defaults to the model zoo)."""
    lookup = get_model or zoo_lookup

    @app.command("byteps")
    @user_errors
    def byteps(
        gpu_machines: int = typer.Option(..., "--gpu-machines", help="n: GPU machines (>= 2)."),
        cpu_machines: int = typer.Option(0, "--cpu-machines", help="k: CPU machines (k = 0: all-reduce)."),
        model: str | None = typer.Option(
            None, "--model", help="Zoo model (or profile .json file) whose gradient size to use."
        ),
        size_bytes: float | None = typer.Option(None, "--bytes", help="Model size M in bytes."),
        bandwidth_gbps: float = typer.Option(100.0, "--bandwidth-gbps", help="NIC bandwidth B, Gb/s."),
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    ) -> None:
        """Communication time, traffic per machine and speed-ups of BytePS vs all-reduce and PS."""
        with option_names(
            model="--model",
            model_bytes="--bytes",
            gpu_machines="--gpu-machines",
            cpu_machines="--cpu-machines",
            bandwidth_bps="--bandwidth-gbps",
        ):
            m = _model_bytes(lookup, model, size_bytes)
            a = byteps_assignment(gpu_machines=gpu_machines, cpu_machines=cpu_machines, model_bytes=m)
            t = byteps_times(a, bandwidth_bps=bandwidth_gbps * GBPS)
        rep = _report(a, t, bandwidth_gbps)
        if model is not None:
            rep["model"] = model
        if json_out:
            print_json(rep)
        else:
            _print(rep)
