"""A job's processes on the host: its cgroup, the processes the agent starts or adopts into it.

* :mod:`.cgroups`: the job's cgroup v2 group (nftables matches a socket's cgroup: the job's mark);
* :mod:`.spawn`: a process started inside the cgroup, its output kept by :mod:`.stamp`;
* :mod:`.slurmprocs`: the processes of Slurm jobs, found by ``SLURM_JOB_ID`` and adopted.

This room imports no other part of the enforcer (``tests/test_runtime_layout.py`` holds it).
"""
