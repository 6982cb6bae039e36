"""Checks and building of the jobs of a scenario file: profile, placement, sync, collective, capacity."""

from __future__ import annotations

from commsched.errors import InputError, UnknownNameError
from commsched.io.problems import Problems, did_you_mean
from commsched.io.schema import JobEntry, ProfileRef, ScenarioFile, ScenarioJob
from commsched.topology import NodeId, Topology
from commsched.workload import JobId, JobSpec, ModelProfile, SyncKind

#: what a command job that declares nothing is registered with until its traffic is measured
NOMINAL_COMPUTE_S = 1.0
NOMINAL_BYTES = 1.0e6


def check_job_numbers(entry: JobEntry, i: int, raw: ScenarioFile, probs: Problems) -> None:
    """Rules between a job and the whole file: a priority class that exists, an arrival that lets it run."""
    levels = raw.priority_levels
    if entry.priority is not None and entry.priority >= levels:
        probs.add(
            ("jobs", i, "priority"),
            f"priority {entry.priority} with {levels} priority levels",
            f"0 .. {levels - 1} (0 = highest)",
        )
    if entry.arrival_s >= raw.horizon_s:
        probs.add(
            ("jobs", i, "arrival_s"),
            f"job {entry.id!r} arrives at {entry.arrival_s:g} s, not before the horizon: it can never run",
            f"< horizon_s = {raw.horizon_s:g}",
        )


def _profile_file(ref: ProfileRef, i: int, probs: Problems) -> ModelProfile | None:
    """The profile a job names with ``model: {profile: FILE}`` (relative to the scenario's folder)."""
    from pathlib import Path

    from commsched.workload.profiling import read_profile_document

    path = Path(ref.profile)
    if not path.is_absolute():
        path = (Path(probs.source).parent if Path(probs.source).exists() else Path.cwd()) / path
    try:
        return read_profile_document(path)
    except InputError as exc:
        probs.add(("jobs", i, "model", "profile"), f"{exc.where}: {exc.what}", exc.expected)
        return None


def _profile(entry: JobEntry, i: int, probs: Problems, measured: bool = False) -> ModelProfile | None:
    undeclared = entry.model is None and entry.compute_s is None and entry.comm_bytes is None
    if entry.command is not None and undeclared:
        return _command_profile(entry, i, probs, measured=measured)
    if entry.model is None and entry.aicb is not None:
        from commsched.io.scenario_groups import aicb_profile

        return aicb_profile(entry, i, probs)
    if entry.model is None:
        return _explicit_profile(entry, i, probs)
    base = _model_profile(entry.model, i, probs)
    if base is None:
        return None
    from dataclasses import replace

    return replace(
        base,
        compute_s=entry.compute_s if entry.compute_s is not None else base.compute_s,
        sync_bytes=entry.comm_bytes if entry.comm_bytes is not None else base.sync_bytes,
        overlap=entry.overlap if entry.overlap is not None else base.overlap,
    )


def _command_profile(entry: JobEntry, i: int, probs: Problems, *, measured: bool) -> ModelProfile | None:
    """A command job that declares no numbers: nominal ones where its traffic is measured, else an error."""
    if not measured:
        probs.add(
            ("jobs", i),
            f"job {entry.id!r} runs a command and declares no compute_s or comm_bytes",
            "both (the simulator needs them; `commsched testbed run` measures them from its traffic)",
        )
        return None
    # declares nothing: the same nominal numbers for every such job (so that the daemon spreads
    # their connections over the paths like any jobs' until their measured profiles arrive)
    return ModelProfile(
        name=f"command:{entry.id}",
        gpu="abstract",
        compute_s=NOMINAL_COMPUTE_S,
        sync_bytes=NOMINAL_BYTES,
        overlap=1.0,
        source="nominal: a command job that declares nothing is measured from its traffic",
    )


def _explicit_profile(entry: JobEntry, i: int, probs: Problems) -> ModelProfile | None:
    """A job without a model: its ``compute_s`` and ``comm_bytes`` (both needed)."""
    explicit = {"compute_s": entry.compute_s, "comm_bytes": entry.comm_bytes}
    missing = [k for k in ("compute_s", "comm_bytes") if explicit[k] is None]
    for k in missing:
        probs.add(("jobs", i), f"job {entry.id!r} has no model and no {k}", f"model: NAME or {k}: VALUE")
    if entry.compute_s is None or entry.comm_bytes is None:
        return None
    return ModelProfile(
        name=f"explicit:{entry.id}",
        gpu="abstract",
        compute_s=entry.compute_s,
        sync_bytes=entry.comm_bytes,
        overlap=1.0 if entry.overlap is None else entry.overlap,
        source="given in the scenario file",
    )


def _model_profile(model: str | ProfileRef, i: int, probs: Problems) -> ModelProfile | None:
    """The profile a job's ``model`` names: a profile file or a model of the zoo."""
    if isinstance(model, ProfileRef):
        return _profile_file(model, i, probs)
    from commsched.workload.grouped_jobs import resolve_model

    try:
        return resolve_model(model)
    except UnknownNameError:
        from commsched.workload.grouped import LLM_MODELS
        from commsched.workload.zoo import model_names

        valid = sorted({*model_names(aliases=True), *(f"{m}@h200" for m in LLM_MODELS)})
        what = f"unknown model {model!r}" + did_you_mean(model, valid)
        probs.add(("jobs", i, "model"), what, "a model that `commsched models` lists: " + ", ".join(valid))
        return None
    except InputError as exc:
        probs.add(("jobs", i, "model"), exc.what, exc.expected)
        return None


def _placement(entry: JobEntry, i: int, topo: Topology, probs: Problems) -> tuple[NodeId, ...] | None:
    if entry.gpu_ids is not None and entry.hosts is not None:
        probs.add(("jobs", i), "both hosts and gpu_ids given", "one of hosts, gpu_ids")
        return None
    if entry.gpu_ids is not None:
        known_gpus = set(map(str, topo.gpus))
        bad = [g for g in entry.gpu_ids if g not in known_gpus]
        if bad:
            probs.add(
                ("jobs", i, "gpu_ids"), f"unknown GPU(s) {', '.join(bad[:3])}", "GPU ids of the topology"
            )
            return None
        return tuple(NodeId(g) for g in entry.gpu_ids)
    if entry.hosts is None:
        if entry.gpus_per_host is not None:
            probs.add(("jobs", i, "gpus_per_host"), "given without hosts", "hosts: [...] with it")
        return ()
    return _host_placement(entry, entry.hosts, i, topo, probs)


def _host_placement(
    entry: JobEntry, hosts: list[str], i: int, topo: Topology, probs: Problems
) -> tuple[NodeId, ...] | None:
    """The GPUs of the hosts a job names (``gpus_per_host`` of each, default all)."""
    gpus: list[NodeId] = []
    known = {str(h.id): h for h in topo.hosts}
    for k, name in enumerate(hosts):
        host = known.get(str(name))
        if host is None:
            sample = ", ".join(list(known)[:4])
            probs.add(
                ("jobs", i, "hosts", k), f"unknown host {name!r}", f"a host of the topology, e.g. {sample}"
            )
            return None
        per = entry.gpus_per_host or len(host.gpus)
        if per > len(host.gpus):
            probs.add(
                ("jobs", i, "gpus_per_host"),
                f"{per} GPUs asked of host {name!r}",
                f"at most {len(host.gpus)}",
            )
            return None
        gpus.extend(host.gpus[:per])
    if len(set(gpus)) != len(gpus):
        probs.add(("jobs", i, "hosts"), "a host is listed twice", "distinct hosts")
        return None
    return tuple(gpus)


def build_job(
    entry: JobEntry, i: int, topo: Topology | None, probs: Problems, *, measured_commands: bool = False
) -> ScenarioJob | None:
    profile = _profile(entry, i, probs, measured_commands)
    if entry.iterations is not None and entry.duration_s is not None:
        probs.add(("jobs", i), "both iterations and duration_s given", "at most one of them")
    if topo is None or profile is None:
        return None
    gpu_ids = _job_gpus(entry, i, topo, probs)
    if gpu_ids is None:
        return None
    n = len(gpu_ids) if gpu_ids else entry.gpus
    if n is None and entry.aicb is not None:
        n = 1  # the log's world size replaces it
    assert n is not None
    spec = JobSpec(
        id=JobId(entry.id),
        profile=profile,
        gpus=n,
        model=entry.model if isinstance(entry.model, str | None) else profile.name,
        hosts=tuple(entry.hosts or ()),
        gpu_ids=tuple(entry.gpu_ids or ()),
        arrival_s=entry.arrival_s,
        iterations=entry.iterations,
        duration_s=entry.duration_s,
        collective=entry.collective,
        priority=entry.priority,
        sync=SyncKind(entry.sync),
        ps_servers=entry.cpu_machines,
        intrajob=entry.intrajob,
        transport=entry.transport or ("persistent" if entry.command is not None else "rebind"),
    )
    _check_collective(entry, i, probs)
    _check_sync(entry, i, profile, probs)
    _check_command(entry, i, probs)
    from commsched.io.scenario_groups import grouped_spec

    grouped = grouped_spec(entry, i, spec, topo, probs)
    if grouped is None:
        return None
    spec = grouped
    return ScenarioJob(
        spec=spec,
        gpu_ids=gpu_ids,
        command=tuple(entry.command or ()),
        processes=entry.processes,
        iteration_log=entry.iteration_log,
        declared=not (
            entry.command is not None
            and entry.model is None
            and entry.compute_s is None
            and entry.comm_bytes is None
        ),
    )


def _job_gpus(entry: JobEntry, i: int, topo: Topology, probs: Problems) -> tuple[NodeId, ...] | None:
    """A job's explicit GPUs (``()``: placed by the placement policy; ``None``: an error was recorded)."""
    if not topo.hosts:
        return _abstract_gpus(entry, i, probs)
    gpu_ids = _placement(entry, i, topo, probs)
    if gpu_ids is None:
        return None
    if not gpu_ids and entry.gpus is None and entry.aicb is None:
        probs.add(("jobs", i), f"job {entry.id!r} has neither gpus nor hosts", "gpus: N or hosts: [...]")
        return None
    if gpu_ids and entry.gpus is not None and entry.gpus != len(gpu_ids):
        probs.add(
            ("jobs", i, "gpus"),
            f"gpus: {entry.gpus} but hosts give {len(gpu_ids)} GPUs",
            "matching counts",
        )
        return None
    return gpu_ids


def _abstract_gpus(entry: JobEntry, i: int, probs: Problems) -> tuple[NodeId, ...] | None:
    """On a topology without hosts a job gives its GPU count only (``None``: an error was recorded)."""
    if entry.hosts or entry.gpu_ids:
        probs.add(("jobs", i, "hosts"), "explicit placement on a topology without hosts", "gpus: N only")
        return None
    if entry.gpus is None:
        probs.add(("jobs", i, "gpus"), "missing", "the job's GPU count")
        return None
    return ()


def _check_command(entry: JobEntry, i: int, probs: Problems) -> None:
    import re

    if entry.command is None and (entry.iteration_log is not None or entry.processes != "per_host"):
        field = "iteration_log" if entry.iteration_log is not None else "processes"
        probs.add(("jobs", i, field), "given for a job without a command", "command: [PROGRAM, ARG, ...]")
    if entry.iteration_log is None:
        return
    try:
        groups = re.compile(entry.iteration_log).groups
    except re.error as exc:
        probs.add(("jobs", i, "iteration_log"), f"not a regular expression: {exc}", "a Python regex")
        return
    if groups != 1:
        probs.add(
            ("jobs", i, "iteration_log"),
            f"{groups} groups",
            "one group: the time of the iteration in seconds, e.g. 'iteration \\d+ ([0-9.]+)'",
        )


def _check_sync(entry: JobEntry, i: int, profile: ModelProfile, probs: Problems) -> None:
    from commsched.intrajob.sweep import policy_registry as intrajob_policies

    if entry.sync == "ps" and entry.cpu_machines < 1:
        probs.add(
            ("jobs", i, "cpu_machines"), "a parameter-server job without CPU machines", "cpu_machines >= 1"
        )
    if entry.sync == "allreduce" and entry.cpu_machines:
        probs.add(
            ("jobs", i, "cpu_machines"), "CPU machines given to an all-reduce job", "sync: ps or byteps"
        )
    if entry.intrajob is not None:
        names = intrajob_policies().names()
        if entry.intrajob not in names:
            probs.add(
                ("jobs", i, "intrajob"),
                f"unknown intra-job policy {entry.intrajob!r}",
                "one of " + ", ".join(names),
            )
        elif not profile.layers:
            probs.add(
                ("jobs", i, "intrajob"),
                f"model {profile.name!r} has no per-layer profile",
                "a model with layers (see `commsched models`)",
            )


def _check_collective(entry: JobEntry, i: int, probs: Problems) -> None:
    from commsched.workload.collectives import collective_registry

    reg = collective_registry()
    if entry.collective not in reg:
        probs.add(
            ("jobs", i, "collective"),
            f"unknown collective {entry.collective!r}",
            "one of " + ", ".join(sorted(reg.names())),
        )


def check_capacity(jobs: list[ScenarioJob], index: list[int], topo: Topology | None, probs: Problems) -> None:
    if topo is None or not topo.hosts:
        return
    total = topo.n_gpus
    owner: dict[NodeId, str] = {}
    for k, j in zip(index, jobs, strict=True):
        if j.spec.gpus > total:
            probs.add(
                ("jobs", k, "gpus"), f"{j.spec.gpus} GPUs asked, the cluster has {total}", f"at most {total}"
            )
        for g in j.gpu_ids:
            if g in owner and j.spec.arrival_s == 0:
                probs.add(
                    ("jobs", k, "hosts"), f"GPU {g} is also given to job {owner[g]!r}", "disjoint placements"
                )
                break
            owner[g] = j.spec.id
