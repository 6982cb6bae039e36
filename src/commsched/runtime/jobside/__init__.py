"""The job's side of the runtime: what runs inside a training job's process and talks to the host.

* :mod:`.agentpolicy` — :class:`~.agentpolicy.AgentPolicy`, the connection policy that asks the
  host agent for each connection's source port and mark (the agent server is
  :mod:`commsched.runtime.agent`);
* :mod:`.jobproc` — one testbed job process on a host (``python -m commsched.runtime.jobside.jobproc
  SPEC.json``): compute as a sleep, real all-reduces through the job library, its profile posted to the
  daemon;
* :mod:`.profilepost` — :class:`~.profilepost.ProfilePoster`, the job's profiler that posts ``W_j``,
  ``t_j`` and the iteration period to the daemon at the end of the profiling window.

The collectives themselves are :mod:`commsched.runtime.transport`, the in-job profiler
:mod:`commsched.runtime.profiling`. Nothing is imported here, so that importing a module of this
package needs only the core.
"""
