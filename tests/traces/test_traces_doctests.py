"""The doctests of the trace and job-scheduler modules."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "commsched.workload.traces.records",
    "commsched.workload.traces.labels",
    "commsched.workload.traces.csvio",
    "commsched.workload.traces.lingjun",
    "commsched.workload.traces.philly",
    "commsched.workload.traces.stats",
    "commsched.workload.traces.synthetic",
    "commsched.scheduling.jobsched",
    "commsched.scheduling.jobsched.hived",
    "commsched.scheduling.jobsched.muri",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
