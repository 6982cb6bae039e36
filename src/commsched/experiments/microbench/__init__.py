"""Crux's optimality microbenchmark (Crux §4.4, Fig. 16): each mechanism against the enumerated optimum.

The cases, the enumeration and scoring, and the run are described in
:mod:`commsched.experiments.microbench.run`; the paper-scale run is
:mod:`commsched.experiments.microbench.paper`.
"""

from __future__ import annotations

from commsched.experiments.microbench.run import (
    MECHANISMS,
    NIC_BPS,
    CaseResult,
    MicrobenchConfig,
    MicrobenchSummary,
    make_case,
    run_case,
    run_microbench,
    summarise,
)

__all__ = [
    "MECHANISMS",
    "NIC_BPS",
    "CaseResult",
    "MicrobenchConfig",
    "MicrobenchSummary",
    "make_case",
    "run_case",
    "run_microbench",
    "summarise",
]
