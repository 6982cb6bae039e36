"""The Python API of commsched: load a scenario, simulate it, compare policies, plan decisions.

Everything a researcher needs is importable from the top level (``import commsched as cs``); this
package holds the functions, and the records live in the layer that owns them.

* :func:`load_scenario`, :func:`build_scenario` — scenarios from files, shipped names or objects;
  :func:`load_profile` — a model profile from the zoo or from a ``commsched profile`` file.
* :func:`simulate`, :func:`compare` — run a scenario under named or custom policies.
* :func:`plan`, :func:`plan_json` — a policy's decisions without simulating.
* :func:`result_frames`, :func:`comparison_frame` — results as pandas DataFrames (extra ``pandas``).
"""

from commsched.api.frames import ResultFrames, comparison_frame, read_comparison, read_result, result_frames
from commsched.api.planning import PlanReport, plan, plan_json
from commsched.api.running import PlacementLike, PolicyLike, compare, resolve_policy, simulate
from commsched.api.scenarios import build_scenario, load_profile, load_scenario

__all__ = [
    "PlacementLike",
    "PlanReport",
    "PolicyLike",
    "ResultFrames",
    "build_scenario",
    "compare",
    "comparison_frame",
    "load_profile",
    "load_scenario",
    "plan",
    "plan_json",
    "read_comparison",
    "read_result",
    "resolve_policy",
    "result_frames",
    "simulate",
]
