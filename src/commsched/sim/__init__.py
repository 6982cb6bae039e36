"""The flow-level simulator: plays decisions forward in time and measures (see ``docs/simulator.md``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from commsched._lazy import lazy_exports

if TYPE_CHECKING:
    from commsched.sim.engine import SimJob, Simulation
    from commsched.sim.results.records import JobResult, Mode, SimConfig, SimResult, TimeSeries

_EXPORTS = {
    "SimJob": "commsched.sim.engine",
    "Simulation": "commsched.sim.engine",
    "JobResult": "commsched.sim.results.records",
    "Mode": "commsched.sim.results.records",
    "SimConfig": "commsched.sim.results.records",
    "SimResult": "commsched.sim.results.records",
    "TimeSeries": "commsched.sim.results.records",
}

__all__ = ["JobResult", "Mode", "SimConfig", "SimJob", "SimResult", "Simulation", "TimeSeries"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
