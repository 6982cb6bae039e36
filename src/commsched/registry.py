"""A strict name -> object registry, used only at the edges (CLI, scenario files, daemon API)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

from commsched.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """One registry per family of policies. Rejects duplicates; unknown names list the valid ones.

    Examples
    --------
    >>> r: Registry[int] = Registry("hash function")
    >>> r.register("crc32", 1)
    >>> r.get("crc32")
    1
    >>> r.get("md5")
    Traceback (most recent call last):
    ...
    commsched.errors.UnknownNameError: unknown hash function 'md5' (expected one of crc32)
    """

    def __init__(self, family: str) -> None:
        self.family = family
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> None:
        if name in self._items:
            raise ValueError(f"{self.family} {name!r} is already registered")
        self._items[name] = item

    def get(self, name: str, *, where: str = "") -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.family, name, list(self._items), where=where) from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
