"""Experiments at the edge: policy comparisons (local processes or Ray), plots, paper reproductions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from commsched._lazy import lazy_exports

if TYPE_CHECKING:
    from commsched.experiments.compare import (
        Comparison,
        PolicySummary,
        compare,
        comparison_json,
        summarise_policy,
        throughput_loss,
    )
    from commsched.experiments.runner import simulate_scenario

_EXPORTS = {
    "Comparison": "commsched.experiments.compare",
    "PolicySummary": "commsched.experiments.compare",
    "compare": "commsched.experiments.compare",
    "comparison_json": "commsched.experiments.compare",
    "summarise_policy": "commsched.experiments.compare",
    "throughput_loss": "commsched.experiments.compare",
    "simulate_scenario": "commsched.experiments.runner",
}

__all__ = [
    "Comparison",
    "PolicySummary",
    "compare",
    "comparison_json",
    "simulate_scenario",
    "summarise_policy",
    "throughput_loss",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
