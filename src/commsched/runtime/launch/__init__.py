"""The launcher of a testbed run: scheduling daemon, host agents and job processes, started and stopped.

:func:`.session.run_policy` runs one policy on a built testbed (daemon on a Unix socket, one agent per
host, one job process per (job, host) or a command job's ranks through the agents) and returns what it
measured (:class:`.session.PolicyRun`); :mod:`.procs` owns every process it starts (stopped by pid,
never by name); :mod:`.waiting` follows the run; :mod:`.jobs` holds the records it is given and
:mod:`.commands` talks to the agents about command jobs; :func:`.teardown.tear_down` removes a testbed and
whatever its agents left (``testbed down`` and the end of every run call it); :mod:`.settings` holds the one
options record of a run (:class:`.settings.RunOptions`). Which jobs run where (from a scenario) and
the simulated twin are the experiment's (:mod:`commsched.experiments.testbed_run`).
"""
