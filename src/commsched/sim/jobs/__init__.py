"""The jobs' room: what the engine knows of each job and the cycle it runs.

* :mod:`.runs`: :class:`~commsched.sim.jobs.runs.JobRun`, a job's run state, and the event kinds;
* :mod:`.lifecycle`: arrivals, the queue, placement, starts and departures;
* :mod:`.iteration`: the compute / release / step cycle of a running job;
* :mod:`.streams`: a grouped job's two streams (its blocking steps and its overlapped ones);
* :mod:`.hooks`: the protocols through which the cycle, the lifecycle, the pacing and the decisions reach
  the fast mode, the event kernel and the counters (this room imports no other).
"""
