"""YAML reading: YAML 1.2 numbers, duplicate keys refused, bounded aliases and nesting, bounded files.

PyYAML alone follows YAML 1.1 and reads ``8.0e9`` and ``1e9`` as strings; :class:`Loader` reads them as
floats. Parsing uses libyaml where PyYAML has it (linear time, fast). A mapping that gives a key twice is
an error (not "the last one wins"). Anchors and aliases are allowed, but the document they expand to is
bounded (:data:`MAX_EXPANDED_NODES`) and may not contain itself, so an alias bomb or a recursive alias
ends at once with one line; nesting is bounded too (:data:`MAX_DEPTH`). Files are read only if they are
regular files of at most :data:`MAX_FILE_BYTES` (``/dev/zero``, FIFOs and directories are refused before
anything is read).
"""

from __future__ import annotations

import gc
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError

from commsched.errors import InputError

#: the largest YAML file commsched reads (scenario and topology files): 4 MiB, some 40,000 jobs; parsed,
#: such a file stays well under 1 GB of memory (jobs by the hundred thousand belong in a trace file)
MAX_FILE_BYTES = 4 * 1024 * 1024
#: the most nodes a document may hold once its aliases are expanded
MAX_EXPANDED_NODES = 1_000_000
#: the deepest nesting of collections a document may have
MAX_DEPTH = 100


def _construct_mapping(
    self: yaml.constructor.SafeConstructor, node: yaml.MappingNode, deep: bool = False
) -> dict[object, object]:
    """``SafeConstructor.construct_mapping`` that refuses a key given twice in one mapping."""
    seen: dict[object, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = self.construct_object(key_node, deep=deep)
        try:
            first = seen.get(key)
        except TypeError:
            continue  # an unhashable key: the base class reports it
        if first is not None:
            raise ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first on line {first.start_mark.line + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node
    return yaml.constructor.SafeConstructor.construct_mapping(self, node, deep=deep)


if yaml.__with_libyaml__:

    class Loader(yaml.CSafeLoader):
        """libyaml's safe loader with the YAML 1.2 float syntax and duplicate keys refused."""

        construct_mapping = _construct_mapping

else:  # pragma: no cover - PyYAML built without libyaml: the same rules, in pure Python

    class Loader(yaml.SafeLoader):  # type: ignore[no-redef]
        """``yaml.SafeLoader`` with the YAML 1.2 float syntax and duplicate keys refused."""

        construct_mapping = _construct_mapping


_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
for _ch in "-+0123456789.":
    Loader.yaml_implicit_resolvers[_ch] = [
        (tag, rx)
        for tag, rx in Loader.yaml_implicit_resolvers.get(_ch, [])
        if tag != "tag:yaml.org,2002:float"
    ]
    Loader.yaml_implicit_resolvers[_ch].insert(0, ("tag:yaml.org,2002:float", _FLOAT))


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a node graph that contains itself or expands to more than ``MAX_EXPANDED_NODES`` nodes.

    Sizes are memoised per node, so the check takes time linear in the number of distinct nodes even
    when aliases would expand them exponentially.
    """
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            total = 1
            for child in _children(node):
                total += size[id(child)]
            if total > MAX_EXPANDED_NODES:
                raise ConstructorError(
                    None,
                    None,
                    f"the document expands to more than {MAX_EXPANDED_NODES:,} nodes "
                    f"({len(size):,} written; the rest come from aliases)",
                    node.start_mark,
                )
            size[key] = total
            continue
        if key in size:
            continue
        if key in on_path:
            raise ConstructorError(None, None, "recursive alias: a node contains itself", node.start_mark)
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            ck = id(child)
            if ck in on_path:
                raise ConstructorError(
                    None, None, "recursive alias: a node contains itself", child.start_mark
                )
            if ck not in size:
                stack.append((child, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_depth(text: str) -> None:
    """Refuse collections nested deeper than :data:`MAX_DEPTH` before composing (the parser's event
    stream is read iteratively, so this check cannot itself overflow the stack)."""
    depth = 0
    for ev in yaml.parse(text, Loader=Loader):
        if isinstance(ev, yaml.SequenceStartEvent | yaml.MappingStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                mark: Any = ev.start_mark
                raise ConstructorError(None, None, f"collections nested deeper than {MAX_DEPTH} levels", mark)
        elif isinstance(ev, yaml.SequenceEndEvent | yaml.MappingEndEvent):
            depth -= 1


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a document is built, and restore it after.

    Building a document allocates millions of small objects that hold no cycles; every collection
    would walk the whole growing heap, which makes parsing quadratic in the file's size. Paused, it is
    linear (measured: 4x the jobs, 4x the time; with the collector on, 6.6x).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _parse(text: str, *, construct: bool) -> object:
    _check_depth(text)
    loader = Loader(text)
    try:
        with _gc_paused():
            node = loader.get_single_node()
            if node is None:
                return None
            _check_expansion(node)
            return loader.construct_document(node) if construct else node
    except RecursionError:
        raise yaml.YAMLError("nested too deeply") from None
    finally:
        loader.dispose()


def compose(text: str) -> yaml.Node | None:
    """Parse YAML text (one document) into checked nodes (see :func:`load`)."""
    node = _parse(text, construct=False)
    assert node is None or isinstance(node, yaml.Node)
    return node


def load(text: str) -> object:
    """Parse YAML text (one document) with :class:`Loader`; aliases bounded, no duplicate keys.

    Examples
    --------
    >>> load("{a: 8.0e9, b: 1e9, c: 3, d: 2.5}")
    {'a': 8000000000.0, 'b': 1000000000.0, 'c': 3, 'd': 2.5}
    >>> load("{a: 1, a: 2}")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    yaml.constructor.ConstructorError: duplicate key 'a' (first on line 1)
    ...
    >>> load("a: &x [*x]")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    yaml.constructor.ConstructorError: recursive alias: a node contains itself
    ...
    """
    return _parse(text, construct=True)


def input_error(exc: yaml.YAMLError, source: str) -> InputError:
    """A YAML error as one line: ``source:line: malformed YAML: what``.

    Examples
    --------
    >>> try:
    ...     load("a: 1\\nb: 2\\na: 3")
    ... except yaml.YAMLError as exc:
    ...     print(input_error(exc, "s.yaml"))
    s.yaml:3: malformed YAML: duplicate key 'a' (first on line 1)
    """
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        what = ", ".join(str(p) for p in (exc.context, exc.problem) if p)
        return InputError(f"malformed YAML: {' '.join(what.split())}", where=where)
    return InputError(f"malformed YAML: {' '.join(str(exc).split())}", where=source)


def check_file(path: Path, *, what: str = "a YAML file", limit: int = MAX_FILE_BYTES) -> int:
    """Check, without reading it, that ``path`` is a regular file of at most ``limit`` bytes.

    Returns
    -------
    int
        The file's size in bytes.

    Raises
    ------
    InputError
        The file is missing, a folder, a special file (``/dev/zero``, a FIFO) or too large.
    """
    where = str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError("file not found", where=where, expected=what) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", where=where, expected=what) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError("is a directory", where=where, expected=what)
    if not stat.S_ISREG(st.st_mode):
        raise InputError("not a regular file (a device, FIFO or socket)", where=where, expected=what)
    if st.st_size > limit:
        raise InputError(
            f"file of {st.st_size:,} bytes is larger than the limit",
            where=where,
            expected=f"<= {limit:,} bytes",
        )
    return st.st_size


def read_text(path: Path, *, what: str = "a YAML file", limit: int = MAX_FILE_BYTES) -> str:
    """Read a UTF-8 text file, refusing special files and files above ``limit`` bytes before reading.

    Raises
    ------
    InputError
        The file is missing, not a regular file, too large, unreadable or not UTF-8.
    """
    where = str(path)
    check_file(path, what=what, limit=limit)
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", where=where, expected=what) from None
    if len(data) > limit:
        raise InputError(
            "file grew larger than the limit while read", where=where, expected=f"<= {limit:,} bytes"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x})", where=where, expected=what
        ) from None
