"""A strict name -> object registry, used only at the edges (CLI, scenario files, daemon API)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from commsched.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """One registry per family of policies. Rejects duplicates; unknown names list the valid ones.

    Items may be registered eagerly (:meth:`register`) or as a loader called on first use
    (:meth:`register_lazy`, used for policies that other installed packages provide through entry
    points, so that a broken plug-in only fails when it is asked for).

    Examples
    --------
    >>> r: Registry[int] = Registry("hash function")
    >>> r.register("crc32", 1)
    >>> r.register_lazy("xor", lambda: 2)
    >>> r.get("crc32"), r.get("xor")
    (1, 2)
    >>> r.get("md5")
    Traceback (most recent call last):
    ...
    commsched.errors.UnknownNameError: unknown hash function 'md5' (expected one of crc32, xor)
    """

    def __init__(self, family: str) -> None:
        self.family = family
        self._items: dict[str, T] = {}
        self._loaders: dict[str, Callable[[], T]] = {}
        self._order: list[str] = []

    def register(self, name: str, item: T) -> None:
        """Add ``item`` under ``name``; a name already taken raises ``ValueError``."""
        if name in self:
            raise ValueError(f"{self.family} {name!r} is already registered")
        self._items[name] = item
        self._order.append(name)

    def register_lazy(self, name: str, loader: Callable[[], T]) -> None:
        """Add an item that ``loader`` builds on the first :meth:`get` of ``name``."""
        if name in self:
            raise ValueError(f"{self.family} {name!r} is already registered")
        self._loaders[name] = loader
        self._order.append(name)

    def get(self, name: str, *, where: str = "") -> T:
        """The item registered under ``name``; an unknown name raises ``UnknownNameError``."""
        if name in self._items:
            return self._items[name]
        loader = self._loaders.get(name)
        if loader is None:
            raise UnknownNameError(self.family, name, list(self), where=where)
        item = loader()
        self._items[name] = item
        del self._loaders[name]
        return item

    def names(self) -> tuple[str, ...]:
        """Every registered name, in registration order."""
        return tuple(self)

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._loaders

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._order))

    def __len__(self) -> int:
        return len(self._order)
