"""What measures a job: the runtime side of profiling, in one home.

* :mod:`.step` — ``commsched profile SCRIPT.py:FUNCTION``: the user's training step timed in a child
  process (``torch`` is an optional extra);
* :mod:`.profiler` — the in-job profiler (Crux §5): bytes and compute per iteration, and the one estimator
  of a job's iteration period with its correction (:func:`.profiler.job_period`);
* :mod:`.traffic` — a job's profile from outside, from a host's byte counters;
* :mod:`.body` — the one builder of the daemon's profile body, which the job's poster
  (:mod:`commsched.runtime.jobside.profilepost`) and the traffic profile both post.

What turns measurements into a model profile (Kineto, execution traces, profile files, a measured step's
layers) is the workload side, :mod:`commsched.workload.profiling`. Nothing is imported here, so that each
part loads only what it needs.
"""
