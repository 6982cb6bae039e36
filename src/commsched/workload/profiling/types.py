"""Element sizes of the tensor types that profilers and execution traces write.

Kineto traces name a tensor's dtype as the C++ type (``float``, ``c10::BFloat16``, ``long int``);
PyTorch execution traces write ``Tensor(float)``; ``record_param_comms`` writes ``Float``, ``BFloat16``.
"""

from __future__ import annotations

from commsched.errors import InputError

_SIZES: dict[str, int] = {
    "float": 4, "double": 8, "c10::half": 2, "c10::bfloat16": 2, "long int": 8, "long": 8, "int": 4,
    "short int": 2, "short": 2, "signed char": 1, "unsigned char": 1, "bool": 1, "char": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::half>": 4,
    "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1, "c10::float8_e4m3fnuz": 1, "c10::float8_e5m2fnuz": 1,
    "unsigned int": 4, "unsigned long": 8, "unsigned short": 2,
    # record_param_comms' dtype names
    "float32": 4, "float64": 8, "float16": 2, "half": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
    "int8": 1, "uint8": 1, "byte": 1,
}  # fmt: skip


def element_size(type_name: str, *, where: str = "") -> int:
    """Bytes per element of ``type_name`` (``float``, ``Tensor(c10::BFloat16)``, ``BFloat16`` ...).

    Raises
    ------
    InputError
        A type this table does not know.

    Examples
    --------
    >>> element_size("float"), element_size("Tensor(c10::BFloat16)"), element_size("Half")
    (4, 2, 2)
    """
    t = type_name.strip()
    if t.startswith("Tensor(") and t.endswith(")"):
        t = t[len("Tensor(") : -1]
    size = _SIZES.get(t.lower())
    if size is None:
        raise InputError(f"unknown tensor type {type_name!r}", where=where, expected="a PyTorch dtype")
    return size
