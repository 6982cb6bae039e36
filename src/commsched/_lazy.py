"""Names of a package loaded from their modules on first use (PEP 562), so that imports stay cheap."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose public names live in its modules.

    Parameters
    ----------
    package
        The package's ``__name__`` (for error messages).
    exports
        Public name -> module that defines it.
    namespace
        The package's ``globals()``; a name is cached there after its first look-up.

    Examples
    --------
    >>> ns: dict[str, Any] = {}
    >>> getattr_, dir_ = lazy_exports("demo", {"sqrt": "math"}, ns)
    >>> getattr_("sqrt")(9.0), "sqrt" in ns, dir_()
    (3.0, True, ['sqrt'])
    """

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return getattr_, dir_
