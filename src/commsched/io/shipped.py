"""Scenarios shipped with the package (``commsched scenarios`` lists them)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from commsched.errors import InputError
from commsched.io.scenario import Scenario, load_scenario, scenario_from_text


def shipped_names() -> tuple[str, ...]:
    """Names of the shipped scenarios (file stems), sorted."""
    root = resources.files("commsched") / "scenarios"
    return tuple(sorted(p.name[: -len(".yaml")] for p in root.iterdir() if p.name.endswith(".yaml")))


def shipped_text(name: str) -> str:
    root = resources.files("commsched") / "scenarios"
    res = root / f"{name}.yaml"
    if not res.is_file():
        raise InputError(
            f"unknown scenario {name!r}",
            where="SCENARIO",
            expected="a file or one of " + ", ".join(shipped_names()),
        )
    return res.read_text(encoding="utf-8")


def shipped_description(name: str) -> str:
    """The scenario's ``description`` field (first line), or its first comment line."""
    import yaml

    text = shipped_text(name)
    data = yaml.safe_load(text)
    if isinstance(data, dict) and isinstance(data.get("description"), str):
        return str(data["description"]).strip().splitlines()[0]
    for line in text.splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
    return ""


def resolve_scenario(spec: str) -> Scenario:
    """A scenario file path, or the name of a shipped scenario."""
    p = Path(spec)
    if p.exists() or p.suffix in (".yaml", ".yml") or "/" in spec:
        return load_scenario(p)
    return scenario_from_text(shipped_text(spec), source=f"{spec} (shipped)")
