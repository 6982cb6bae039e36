"""Slurm's side of commsched: the hooks that register every Slurm job with the daemon (docs/slurm.md).

The agents find the jobs' processes themselves (``commsched agent --enforce --slurm``,
:mod:`commsched.runtime.enforce.processes.slurmprocs`); the hooks here only tell the daemon.
"""
