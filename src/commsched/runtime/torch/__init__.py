"""PyTorch integration: DDP gradient all-reduce through commsched's transport.

An ordinary data-parallel training script keeps its ``init_process_group("gloo")`` and its
``DistributedDataParallel`` wrapper, and adds two lines::

    from commsched.runtime.torch import install
    comm = install(ddp_model, job="job-7")   # options=Options(policy=...): the host agent's marks

:func:`install` joins a commsched group with the ranks of the default process group (the listening
addresses are exchanged through it) and registers :func:`allreduce_hook` as the model's DDP
communication hook, so every gradient bucket is summed by commsched's ring all-reduce over connections
that carry the job's source ports and DSCP, then divided by the world size as DDP's default hook does.
Gloo still carries DDP's one-off parameter broadcast at construction.

Requires the ``torch`` extra (``torch>=2.13``; CPU tensors).

References
----------
PyTorch, "DDP Communication Hooks" (``register_comm_hook``, ``GradBucket``).
"""

from commsched.runtime.torch.hooks import allreduce_hook, install, join_default_group

__all__ = ["allreduce_hook", "install", "join_default_group"]
