"""PyTorch integration: DDP gradient all-reduce through commsched's transport.

An ordinary data-parallel training script keeps its ``init_process_group("gloo")`` and its
``DistributedDataParallel`` wrapper, and adds two lines::

    from commsched.runtime.torch import install
    hook = install(ddp_model, job="job-7")

With a host agent on the machine (``commsched agent --listen unix:/run/commsched-h0.sock``), pass its
client as the connection policy so that every connection takes the agent's source port and mark::

    from commsched.runtime import AgentPolicy, Options
    policy = AgentPolicy(socket_path="/run/commsched-h0.sock", job="job-7", refresh_s=1.0)
    hook = install(ddp_model, job="job-7", options=Options(policy=policy, policy_refresh_s=1.0))

:func:`install` joins a commsched group with the ranks of the default process group (the listening
addresses are exchanged through it) and registers :func:`allreduce_hook` as the model's DDP
communication hook, so every gradient bucket is summed (on a worker thread, overlapping the rest of
backward) by commsched's ring all-reduce over connections
that carry the job's source ports and DSCP, then divided by the world size as DDP's default hook does.
Gloo still carries DDP's one-off parameter broadcast at construction.

Requires the ``torch`` extra (``torch>=2.13``). CPU buckets are reduced in place; CUDA buckets go
through reused pinned host buffers, copied on a side stream (:mod:`.staging`, with its cost).

References
----------
PyTorch, "DDP Communication Hooks" (``register_comm_hook``, ``GradBucket``).
"""

from commsched.runtime.torch.hooks import HookState, allreduce_hook, install, join_default_group
from commsched.runtime.torch.staging import Stager

__all__ = ["HookState", "Stager", "allreduce_hook", "install", "join_default_group"]
