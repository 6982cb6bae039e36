"""The dtypes a grouped job's data-parallel collectives move: gradients reduced, parameters gathered.

A profile's ``sync_bytes`` are the model's gradients in fp32, 4 bytes per parameter (the zoo's and the
named LLMs' convention): a rank's shard of ``S`` such bytes holds ``S / 4`` parameters, and a collective
in dtype ``x`` moves ``S / 4 x bytes(x)``. The defaults follow the frameworks (bf16 training):

=====  ==========================================  ==========  ==========  ===============================
zero   framework                                   gradients   parameters  source
=====  ==========================================  ==========  ==========  ===============================
0      Megatron-LM DDP (all-reduce)                fp32        --          [1]
1, 2   Megatron-LM distributed optimizer           fp32        bf16        [1], [2]; AICB's G13B log
3      DeepSpeed ZeRO-3                            bf16        bf16        [3]; AICB's ZeRO-3 logs
=====  ==========================================  ==========  ==========  ===============================

``parallel.grad_dtype`` and ``parallel.param_dtype`` override them per job (``fp32``, ``bf16``,
``fp16``, ``fp8``).

References
----------
.. [1] Megatron-LM core_r0.6.0, ``megatron/training/arguments.py``: with ``--bf16`` the gradients are
   accumulated and reduced in fp32 (``accumulate_allreduce_grads_in_fp32`` forced on).
.. [2] Megatron-LM core_r0.6.0, ``megatron/core/distributed/param_and_grad_buffer.py`` and
   ``megatron/core/optimizer/distrib_optimizer.py``: the distributed optimizer reduce-scatters the fp32
   gradient buffer and all-gathers the updated parameters in the model's dtype (bf16). AICB's
   ``G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1.csv`` reduce-scatters 6.42 GB and all-gathers 3.21 GB.
.. [3] DeepSpeed v0.14, configuration ``communication_data_type`` (default: the model's dtype) and
   ``zero_optimization.stage 3`` (parameters gathered in the model's dtype before each use); AICB's
   ``L7B-D1-C02_Llama7B_zero3_mbs1.csv`` reduce-scatters 13.5 GB for LLaMA-7B's 6.7 B parameters.
"""

from __future__ import annotations

__all__ = ["DTYPE_BYTES", "dp_dtypes"]

#: bytes per element of the dtypes a collective may move
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}

#: bytes per parameter of a profile's ``sync_bytes`` (fp32 gradients)
SYNC_DTYPE_BYTES = 4


def dp_dtypes(zero: int, grad_dtype: str = "", param_dtype: str = "") -> tuple[str, str]:
    """``(gradient dtype, parameter dtype)`` of the DP collectives under ZeRO stage ``zero``; an empty
    override takes the framework's default (module table).

    Examples
    --------
    >>> dp_dtypes(1), dp_dtypes(0), dp_dtypes(3), dp_dtypes(1, param_dtype="fp32")
    (('fp32', 'bf16'), ('fp32', 'bf16'), ('bf16', 'bf16'), ('fp32', 'fp32'))
    """
    grad, param = ("bf16", "bf16") if zero == 3 else ("fp32", "bf16")
    return grad_dtype or grad, param_dtype or param
