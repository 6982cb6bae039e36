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
    points, so that a broken plug-in only fails when it is asked for). Each item is registered with
    its one-line description and, optionally, aliases: other names that resolve to the same item
    (listed once, under its name). A name or alias taken twice raises ``ValueError``.

    Parameters
    ----------
    family
        What the items are, for messages (``"policy"``, ``"hash function"``).
    as_alias
        How an item is handed out under an alias (e.g. a bundle renamed to it); default: as it is.
    describe
        The description of an item registered without one (a plug-in's, known once it is loaded).

    Examples
    --------
    >>> r: Registry[int] = Registry("hash function")
    >>> r.register("crc32", 1, description="zlib's CRC-32", aliases=("crc",))
    >>> r.register_lazy("xor", lambda: 2)
    >>> r.get("crc32"), r.get("crc"), r.get("xor"), r.names(), r.description("crc")
    (1, 1, 2, ('crc32', 'xor'), "zlib's CRC-32")
    >>> r.get("md5")
    Traceback (most recent call last):
    ...
    commsched.errors.UnknownNameError: unknown hash function 'md5' (expected one of crc, crc32, xor)
    >>> r.register("crc", 3)
    Traceback (most recent call last):
    ...
    ValueError: hash function 'crc' is already registered
    """

    def __init__(
        self,
        family: str,
        *,
        as_alias: Callable[[T, str], T] | None = None,
        describe: Callable[[T], str] | None = None,
    ) -> None:
        self.family = family
        self._as_alias = as_alias
        self._describe = describe
        self._items: dict[str, T] = {}
        self._loaders: dict[str, Callable[[], T]] = {}
        self._order: list[str] = []
        self._aliases: dict[str, str] = {}  # alias -> name
        self._descriptions: dict[str, str] = {}

    def _claim(self, name: str, description: str, aliases: tuple[str, ...]) -> None:
        new = (name, *aliases)
        for i, n in enumerate(new):
            if n in self or n in new[:i]:
                raise ValueError(f"{self.family} {n!r} is already registered")
        self._order.append(name)
        self._descriptions[name] = description
        self._aliases.update(dict.fromkeys(aliases, name))

    def register(self, name: str, item: T, *, description: str = "", aliases: tuple[str, ...] = ()) -> None:
        """Add ``item`` under ``name`` (and ``aliases``); a name already taken raises ``ValueError``."""
        self._claim(name, description, aliases)
        self._items[name] = item

    def register_lazy(
        self, name: str, loader: Callable[[], T], *, description: str = "", aliases: tuple[str, ...] = ()
    ) -> None:
        """Add an item that ``loader`` builds on the first :meth:`get` of ``name``."""
        self._claim(name, description, aliases)
        self._loaders[name] = loader

    def canonical(self, name: str, *, where: str = "") -> str:
        """The name ``name`` is an alias of, else ``name``; an unknown name raises ``UnknownNameError``."""
        if name not in self:
            raise UnknownNameError(self.family, name, self.accepted(), where=where)
        return self._aliases.get(name, name)

    def get(self, name: str, *, where: str = "") -> T:
        """The item registered under ``name`` (or an alias); an unknown name raises ``UnknownNameError``."""
        key = self.canonical(name, where=where)
        if key not in self._items:
            self._items[key] = self._loaders[key]()  # a loader that fails stays, and fails again
            del self._loaders[key]
        item = self._items[key]
        if key != name and self._as_alias is not None:
            return self._as_alias(item, name)
        return item

    def description(self, name: str) -> str:
        """The one-line description registered with ``name`` (or the name it is an alias of)."""
        key = self.canonical(name)
        if self._descriptions[key] or self._describe is None:
            return self._descriptions[key]
        return self._describe(self.get(key))

    def aliases(self, name: str) -> tuple[str, ...]:
        """The aliases of ``name``, in registration order."""
        key = self.canonical(name)
        return tuple(a for a, n in self._aliases.items() if n == key)

    def names(self) -> tuple[str, ...]:
        """Every registered name (aliases not included), in registration order."""
        return tuple(self)

    def accepted(self) -> tuple[str, ...]:
        """Every name :meth:`get` accepts: the registered names, then the aliases."""
        return (*self, *self._aliases)

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._loaders or name in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._order))

    def __len__(self) -> int:
        return len(self._order)
