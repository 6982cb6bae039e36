"""The results' room: what a simulation measures and returns.

* :mod:`.records`: the inputs and outputs of a run (typed frozen records: config, results, series);
* :mod:`.accounting`: the cumulative counters and their samples in time;
* :mod:`.summary`: the result, from the run state and the samples;
* :mod:`.ideal`: each job's ideal iteration time, the one reference of its slowdown;
* :mod:`.metrics`, :mod:`.gputime`: derived figures (Crux's theorems, GPU time);
* :mod:`.comparison`: the records of a policy comparison and its figures.
"""
