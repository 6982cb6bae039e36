"""Files at the edge: scenario YAML (validated, with line numbers), shipped scenarios, results JSON/CSV."""

from __future__ import annotations

from typing import TYPE_CHECKING

from commsched._lazy import lazy_exports

if TYPE_CHECKING:
    from commsched.io.results import (
        read_comparison,
        read_links,
        read_summary,
        read_utilization,
        result_summary,
        write_outputs,
    )
    from commsched.io.scenario import (
        Scenario,
        ScenarioJob,
        load_scenario,
        scenario_from_data,
        scenario_from_text,
    )
    from commsched.io.shipped import resolve_scenario, shipped_names

_EXPORTS = {
    "read_comparison": "commsched.io.results",
    "read_links": "commsched.io.results",
    "read_summary": "commsched.io.results",
    "read_utilization": "commsched.io.results",
    "result_summary": "commsched.io.results",
    "write_outputs": "commsched.io.results",
    "Scenario": "commsched.io.scenario",
    "ScenarioJob": "commsched.io.scenario",
    "load_scenario": "commsched.io.scenario",
    "scenario_from_data": "commsched.io.scenario",
    "scenario_from_text": "commsched.io.scenario",
    "resolve_scenario": "commsched.io.shipped",
    "shipped_names": "commsched.io.shipped",
}

__all__ = [
    "Scenario",
    "ScenarioJob",
    "load_scenario",
    "read_comparison",
    "read_links",
    "read_summary",
    "read_utilization",
    "resolve_scenario",
    "result_summary",
    "scenario_from_data",
    "scenario_from_text",
    "shipped_names",
    "write_outputs",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
