"""Loading the user's training step: ``FILE.py:FUNCTION`` or ``package.module:FUNCTION``.

The function builds the job and returns either ``(model, step)`` — ``step()`` runs one forward and
backward pass of ``model`` (no optimizer step; the model is called once) — or ``(model, batch, loss_fn)``:
commsched then runs ``loss_fn(model(inputs), targets)`` for ``batch = (inputs, targets)``, or
``loss_fn(model(batch))`` for a single tensor, and its backward pass. A function that takes a ``device``
argument is called with the device name (``cpu``, ``cuda``) so that it can build its data there; with the
``(model, batch, loss_fn)`` form commsched also moves the model and the batch to the device.

Loading a file runs it: this is the user's own code, as ``python FILE.py`` would run it.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commsched.errors import InputError

if TYPE_CHECKING:
    import torch

EXPECTED = "a function returning (model, step) or (model, batch, loss_fn)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A loaded training step: the model and either ``step`` or ``batch`` + ``loss_fn``."""

    model: torch.nn.Module
    step: Callable[[], Any] | None = None
    batch: Any = None
    loss_fn: Callable[..., Any] | None = None


def user_failure(what: str, exc: BaseException, where: str) -> InputError:
    """An :class:`InputError` for an exception raised by the user's code (its type and first line)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return InputError(f"{what}: {type(exc).__name__}: {first}"[:300], where=where, expected="code that runs")


def _is_file(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or Path(spec).suffix == ".py"


def script_folder(target: str) -> Path | None:
    """The folder of a ``FILE.py:FUNCTION`` target's script (``None`` for a module target)."""
    module = target.rpartition(":")[0]
    return Path(module).resolve().parent if module and _is_file(module) else None


def _module(spec: str, where: str) -> Any:
    if _is_file(spec):
        path = Path(spec)
        if not path.is_file():
            raise InputError("no such file", where=where, expected="a Python file or an importable module")
        name = f"_commsched_step_{abs(hash(str(path.resolve())))}"
        loader_spec = importlib.util.spec_from_file_location(name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise InputError("cannot load this file", where=where, expected="a Python source file")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        try:
            loader_spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise user_failure(f"running {path.name} failed", exc, where) from None
        return module
    try:
        return importlib.import_module(spec)
    except ImportError as exc:
        raise InputError(
            f"cannot import {spec!r} ({exc})", where=where, expected="an importable module"
        ) from None
    except Exception as exc:
        raise user_failure(f"importing {spec} failed", exc, where) from None


def load_function(target: str) -> Callable[..., Any]:
    """The function ``target`` names (``FILE.py:FUNCTION`` or ``package.module:FUNCTION``).

    Raises
    ------
    InputError
        A malformed target, a missing file or module, an error while importing, or no such function.
    """
    where = target
    module_part, sep, func = target.rpartition(":")
    if not sep or not module_part or not func.isidentifier():
        raise InputError(
            f"target {target!r}", where="TARGET", expected="FILE.py:FUNCTION or package.module:FUNCTION"
        )
    module = _module(module_part, where)
    fn = getattr(module, func, None)
    if not callable(fn):
        found = sorted(n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_"))
        raise InputError(
            f"no function {func!r}",
            where=where,
            expected=f"{EXPECTED}; functions there: {', '.join(found) or 'none'}",
        )
    return fn  # type: ignore[no-any-return]


def _to_device(value: Any, device: str) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple | list):
        return type(value)(_to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    return value


def build_job(fn: Callable[..., Any], *, device: str, where: str) -> Job:
    """Call the user's function and check what it returns; the model (and batch) go to ``device``."""
    import torch

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    try:
        out = fn(device=device) if "device" in params else fn()
    except Exception as exc:
        raise user_failure("building the job failed", exc, where) from None
    if not isinstance(out, tuple) or len(out) not in (2, 3) or not isinstance(out[0], torch.nn.Module):
        got = type(out).__name__ if not isinstance(out, tuple) else f"a tuple of {len(out)}"
        raise InputError(
            f"the function returned {got}", where=where, expected=EXPECTED + " with an nn.Module"
        )
    model = out[0]
    if len(out) == 2:
        if not callable(out[1]):
            raise InputError("step is not callable", where=where, expected=EXPECTED)
        return Job(model=model, step=out[1])
    if not callable(out[2]):
        raise InputError("loss_fn is not callable", where=where, expected=EXPECTED)
    return Job(model=model.to(device), batch=_to_device(out[1], device), loss_fn=out[2])


def batch_size(batch: Any) -> int | None:
    """Samples in a batch: the first dimension of its first tensor (``None`` when there is none)."""
    import torch

    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() > 0 else None
    if isinstance(batch, tuple | list) and batch:
        return batch_size(batch[0])
    if isinstance(batch, dict) and batch:
        return batch_size(next(iter(batch.values())))
    return None
