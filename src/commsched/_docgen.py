"""Reference pages generated from the code, so that they cannot drift from it.

* :func:`scenario_reference` — every field of a scenario file, from the schema the validator uses
  (:class:`~commsched.io.scenario.ScenarioFile`, :class:`~commsched.io.scenario.JobEntry`), the
  topology builders' signatures and the trace loaders' parameters;
* :func:`cli_reference` — every command of ``commsched`` with its arguments and options, from the
  Typer application.

The MkDocs hook ``docs/hooks.py`` renders both into the site at build time.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

#: what each top-level field means (units are in the names: ``_s`` seconds, ``_bps`` bits/s, ``_bytes``)
SCENARIO_FIELDS: dict[str, str] = {
    "name": "Name reported in results; default: the file name without extension.",
    "description": "Free text; its first line is what `commsched scenarios` shows.",
    "topology": "The cluster: `kind` names a builder, the other keys are its parameters (below).",
    "priority_levels": "Hardware priority classes the policies may use (class 0 is the highest).",
    "policy": "Communication policy by name (`commsched policies`; plug-ins as `package:name`).",
    "placement": "Placement (job scheduler) for jobs given `gpus: N`: pack, first-fit, hived, muri.",
    "queue": "Order of the waiting queue: fifo (arrival order) or a vClos queue order.",
    "backfill": "Let later waiting jobs that fit start when the first one does not.",
    "horizon_s": "Simulated time after which every job still running stops, seconds.",
    "warmup_s": "Start of the window over which averages are taken, seconds.",
    "seed": "Seed of the run (ECMP source ports and other random draws).",
    "mode": "`exact` simulates every iteration; `fast` extrapolates periodic steady states.",
    "fluid_min_jobs": "Fast mode: components of at least this many contending jobs run at their fluid "
    "steady state (0: never; default: the engine's); `simulate --fluid-min-jobs N` overrides it.",
    "trace": "Jobs from a trace file or a generator: `kind` plus the loader's parameters (below).",
    "jobs": "The jobs, one mapping each (fields below).",
}

#: what each job field means
JOB_FIELDS: dict[str, str] = {
    "id": "Unique job name.",
    "model": (
        "A model of the zoo (`commsched models`, e.g. `resnet50` or `resnet50@h200-bf16`), or "
        "`{profile: FILE.json}`: a profile written by `commsched profile` (path relative to the scenario "
        "file); else give `compute_s` and `comm_bytes`."
    ),
    "gpus": "GPU count, placed by the `placement` policy (or the count of an explicit placement).",
    "hosts": "Explicit placement: these hosts (all their GPUs, or `gpus_per_host` of each).",
    "gpus_per_host": "GPUs used on each of `hosts`.",
    "gpu_ids": "Explicit placement by GPU id (e.g. `h2/gpu0`), in rank order.",
    "compute_s": "Compute time of one iteration, seconds (overrides the model's).",
    "comm_bytes": "Bytes each GPU synchronises per iteration (overrides the model's).",
    "overlap": "Fraction of the compute after which communication is released (1: no overlap).",
    "arrival_s": "Arrival time, seconds.",
    "iterations": "Iterations to run (else until `duration_s` or the horizon).",
    "duration_s": "Training time to run, seconds (instead of `iterations`).",
    "collective": "Collective algorithm: ring, halving_doubling, hierarchical_ring, tree, ...",
    "priority": "Priority written on the job (used by the `static` policy; 0 is the highest).",
    "sync": "Synchronisation: allreduce, ps (parameter server) or byteps.",
    "cpu_machines": "CPU machines of a ps or byteps job.",
    "intrajob": "Layer-wise iteration model inside the job: wfbp, bytescheduler, mercury, ...",
    "transport": "`rebind`: the job's connections follow new routes at once; `persistent`: they keep the "
    "routes of the first decision (default for a `command` job).",
    "command": "An unmodified program run as the job's ranks by `testbed run` (argv; docs/real-jobs.md).",
    "processes": "A command job's processes: one per host (per_host) or per GPU slot (per_gpu).",
    "iteration_log": "Regex over a command job's output whose one group is an iteration's time, s.",
    "parallel": "Parallel groups: tp, pp, dp, ep, zero, micro_batches, schedule, order (docs/llm-jobs.md).",
    "aicb": "An AICB per-collective log (CSV): the job's groups and bytes per iteration (docs/llm-jobs.md).",
}


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if not getattr(annotation, "__args__", None) else None
    return text or re.sub(r"\b(?:[a-z_]\w*\.)+(?=[A-Za-z_])", "", str(annotation))  # no module paths


def _constraints(info: FieldInfo) -> str:
    out = []
    for m in info.metadata:
        for attr, sym in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="), ("min_length", "length >=")):
            value = getattr(m, attr, None)
            if value is not None:
                out.append(f"{sym} {value}")
    return ", ".join(out)


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        return f"`{info.default_factory()!r}`"  # type: ignore[call-arg]
    return f"`{info.default!r}`"


def model_rows(model: type[BaseModel], descriptions: dict[str, str]) -> list[str]:
    """Markdown table rows (field, type, default, constraint, meaning) of a pydantic model.

    Examples
    --------
    >>> from commsched.io.scenario import JobEntry
    >>> model_rows(JobEntry, JOB_FIELDS)[0]
    '| `id` | `str` | required | length >= 1 | Unique job name. |'
    """
    rows = []
    for name, info in model.model_fields.items():
        rows.append(
            f"| `{name}` | `{_cell(_type_name(info.annotation))}` | {_default(info)} | {_constraints(info)} "
            f"| {descriptions.get(name, '')} |"
        )
    return rows


def _table(rows: Iterable[str]) -> list[str]:
    return ["| field | type | default | constraint | meaning |", "|---|---|---|---|---|", *rows]


def _topology_section() -> list[str]:
    from commsched.topology.builders import topology_builders

    out = ["## `topology`", "", "`kind` names a builder; its keyword parameters are the other keys.", ""]
    reg = topology_builders()
    for kind in reg.names():
        params = inspect.signature(reg.get(kind)).parameters.values()
        items = [
            f"`{p.name}`" + ("" if p.default is inspect.Parameter.empty else f" = `{p.default!r}`")
            for p in params
        ]
        out.append(f"- **`{kind}`**: " + (", ".join(items) or "no parameters"))
    return [*out, ""]


def _trace_section() -> list[str]:
    from commsched.io.traces import COMMON_KEYS, trace_loaders, valid_params

    out = [
        "## `trace`",
        "",
        "`kind` names a loader; its parameters are the other keys. Every kind also takes "
        + ", ".join(f"`{k}`" for k in COMMON_KEYS)
        + ". Relative paths are taken from the scenario file's folder.",
        "",
    ]
    reg = trace_loaders()
    for kind in reg.names():
        out.append(f"- **`{kind}`**: " + ", ".join(f"`{p}`" for p in valid_params(kind, reg.get(kind))))
    return [*out, ""]


def scenario_reference() -> str:
    """The scenario file reference page (Markdown), generated from the validator's schema.

    Examples
    --------
    >>> page = scenario_reference()
    >>> "| `horizon_s` | `float` | required | > 0, <= 315360000.0 |" in page and "## `jobs[]`" in page
    True
    """
    from commsched.io.scenario import JobEntry, ScenarioFile

    lines = [
        "# Scenario files",
        "",
        "A scenario file is YAML: a topology, jobs (or a trace) and the policy to run. This page is",
        "generated from the schema the validator uses (`commsched validate FILE` checks a file), so",
        "every field the validator accepts is listed. Units are in the names: `_s` seconds, `_bps` bits",
        "per second, `_bytes` bytes. Unknown fields are errors.",
        "",
        "## Top level",
        "",
        *_table(model_rows(ScenarioFile, SCENARIO_FIELDS)),
        "",
        "## `jobs[]`",
        "",
        *_table(model_rows(JobEntry, JOB_FIELDS)),
        "",
        *_topology_section(),
        *_trace_section(),
    ]
    return "\n".join(lines)


def _cell(text: str, *, code: bool = False) -> str:
    """Text as one Markdown table cell; plain text (not ``code``) has its brackets escaped, so that
    ``a[i][j]`` does not read as a reference link."""
    cell = " ".join(text.split()).replace("|", "\\|")
    return cell if code else cell.replace("[", "\\[").replace("]", "\\]")


def _arg_name(arg: Any) -> str:
    return str(getattr(arg, "metavar", None) or arg.name).upper()


def _command_lines(name: str, command: Any) -> list[str]:
    sub = getattr(command, "commands", None)
    if sub:  # a group: its subcommands, each with its own section
        out = [f"## `commsched {name}`", "", inspect.cleandoc(command.help or ""), ""]
        for child in sorted(sub):
            out += _command_lines(f"{name} {child}", sub[child])
        return out
    out = [f"## `commsched {name}`", "", inspect.cleandoc(command.help or ""), ""]
    args = [p for p in command.params if p.param_type_name == "argument"]
    opts = [p for p in command.params if p.param_type_name == "option"]
    usage = " ".join(_arg_name(a) for a in args)
    out += [f"Usage: `commsched {name} [OPTIONS] {usage}`", ""]
    if args or opts:
        out += ["| argument / option | meaning | default |", "|---|---|---|"]
    for a in args:
        help_text = getattr(a, "help", None) or ""
        default = "required" if a.required else f"`{a.default}`"
        out.append(f"| `{_arg_name(a)}` | {_cell(help_text)} | {default} |")
    for o in opts:
        flags = ", ".join(f"`{f}`" for f in [*o.opts, *o.secondary_opts])
        shown = o.default is not None and not (o.is_flag and not o.default)
        default = f"`{_cell(str(o.default), code=True)}`" if shown else ""
        out.append(f"| {flags} | {_cell(o.help or '')} | {default} |")
    return [*out, ""]


def cli_reference() -> str:
    """The command-line reference page (Markdown), generated from the Typer commands.

    Examples
    --------
    >>> page = cli_reference()
    >>> "## `commsched simulate`" in page and "`--policy`, `-p`" in page
    True
    """
    import typer

    from commsched.cli.app import app

    group = typer.main.get_command(app)
    lines = [
        "# Command line",
        "",
        "Generated from the commands themselves (`commsched COMMAND --help` prints the same).",
        "Bad input prints one line naming the file, field or option and exits with code 2.",
        "",
    ]
    commands = getattr(group, "commands", {})
    for name in sorted(commands):
        lines += _command_lines(name, commands[name])
    return "\n".join(lines)
