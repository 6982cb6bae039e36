"""Reading trace files with a size bound: plain or gzipped, JSON or binary, one clear error each.

Every reader of :mod:`commsched.workload.profiling` goes through :func:`read_bytes`, which refuses a
file (or a gzip stream once decompressed) larger than ``max_bytes``, an empty file and a truncated gzip
stream, so that a hostile or broken trace fails with one :class:`~commsched.errors.InputError` line
before any parsing.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from commsched.errors import InputError

#: the default bound on a trace file, plain or decompressed (512 MB)
DEFAULT_MAX_BYTES = 512 * 10**6
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def parse_size(text: str, *, where: str = "--max-bytes") -> int:
    """A size such as ``512MB``, ``1.5GiB`` or ``2000000`` in bytes (MB = 10^6 B, MiB = 2^20 B).

    Examples
    --------
    >>> parse_size("512MB"), parse_size("1KiB"), parse_size("100")
    (512000000, 1024, 100)
    """
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise InputError(
            f"size {text!r}", where=where, expected="a byte count such as 512MB, 2GiB or 1000000"
        )
    value = int(float(m.group(1)) * _UNITS[unit])
    if value < 1:
        raise InputError(f"size {text!r}", where=where, expected="at least 1 byte")
    return value


def _gunzip(raw: bytes, where: str, max_bytes: int) -> bytes:
    out = bytearray()
    stream = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = raw
        while data and not stream.eof:
            out += stream.decompress(data, max_bytes + 1 - len(out))
            if len(out) > max_bytes:
                raise InputError(
                    f"decompresses to more than {max_bytes:,} bytes",
                    where=where,
                    expected="a smaller trace, or a larger --max-bytes",
                )
            data = stream.unconsumed_tail
    except zlib.error as exc:
        raise InputError(f"corrupt gzip stream ({exc})", where=where, expected="a gzip file") from None
    if not stream.eof:
        raise InputError("truncated gzip stream", where=where, expected="a complete gzip file")
    return bytes(out)


def _checked_size(p: Path, *, max_bytes: int, what: str) -> int:
    """The size of ``p``, a regular file of at most ``max_bytes`` (else one error line)."""
    size = p.stat().st_size
    if not p.is_file():
        raise InputError("not a file", where=str(p), expected=f"a {what} file")
    if size > max_bytes:
        raise InputError(
            f"{size:,} bytes, more than {max_bytes:,}",
            where=str(p),
            expected=f"a smaller {what}, or a larger --max-bytes",
        )
    return size


def read_bytes(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES, what: str = "trace") -> bytes:
    """The contents of ``path``, gunzipped when it is a gzip file, at most ``max_bytes`` either way.

    Raises
    ------
    InputError
        Missing, unreadable, empty, too large, or a broken gzip stream.
    """
    p = Path(path)
    where = str(p)
    try:
        _checked_size(p, max_bytes=max_bytes, what=what)
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file", where=where, expected=f"an existing {what} file") from None
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", where=where, expected="a readable file") from None
    if not raw:
        raise InputError("empty file", where=where, expected=f"a {what}")
    data = _gunzip(raw, where, max_bytes) if raw[:2] == _GZIP_MAGIC else raw
    if not data:
        raise InputError("empty file once decompressed", where=where, expected=f"a {what}")
    return data


def looks_like_json(data: bytes) -> bool:
    """Whether ``data`` starts (after white space) like a JSON object or array."""
    return data.lstrip()[:1] in (b"{", b"[")


class TraceStream:
    """A trace file read in chunks, gunzipped on the fly, never more than ``max_bytes`` of it.

    :meth:`read` returns at most ``n`` bytes (fewer only at the end of the data) and raises
    :class:`~commsched.errors.InputError` for a stream beyond the bound, a corrupt or truncated gzip stream
    or a read error; :meth:`head` looks at the first bytes without consuming them. Memory held is the
    chunk asked for, never the whole file.
    """

    def __init__(self, fh: IO[bytes], *, where: str, max_bytes: int) -> None:
        self._fh = fh
        self._where = where
        self._max = max_bytes
        self._pending = b""
        self.offset = 0  # bytes handed out so far

    def _raw(self, n: int) -> bytes:
        try:
            data = self._fh.read(n)
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            what = "truncated gzip stream" if isinstance(exc, EOFError) else f"corrupt gzip stream ({exc})"
            raise InputError(what, where=self._where, expected="a complete gzip file") from None
        except OSError as exc:
            raise InputError(f"cannot read ({exc})", where=self._where, expected="a readable file") from None
        return data

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes (fewer only where the data ends)."""
        out, self._pending = self._pending[:n], self._pending[n:]
        if len(out) < n:
            out += self._raw(n - len(out))
        self.offset += len(out)
        if self.offset > self._max:
            raise InputError(
                f"decompresses to more than {self._max:,} bytes",
                where=self._where,
                expected="a smaller trace, or a larger --max-bytes",
            )
        return out

    def head(self, n: int) -> bytes:
        """The next ``n`` bytes (or fewer at the end), left to be read again."""
        if len(self._pending) < n:
            self._pending += self._raw(n - len(self._pending))
        return self._pending[:n]

    def read_all(self) -> bytes:
        """The rest of the data (within the bound)."""
        parts = []
        while chunk := self.read(_CHUNK):
            parts.append(chunk)
        return b"".join(parts)


@contextlib.contextmanager
def open_trace(
    path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES, what: str = "trace"
) -> Iterator[TraceStream]:
    """Open ``path`` (plain or gzipped) as a :class:`TraceStream` bounded to ``max_bytes``.

    Raises
    ------
    InputError
        Missing, unreadable, empty or too large a file (and, while reading, the stream's own errors).
    """
    p = Path(path)
    where = str(p)
    try:
        size = _checked_size(p, max_bytes=max_bytes, what=what)
        fh: IO[bytes] = p.open("rb")
    except FileNotFoundError:
        raise InputError("no such file", where=where, expected=f"an existing {what} file") from None
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", where=where, expected="a readable file") from None
    with fh:
        gzipped = fh.read(2) == _GZIP_MAGIC
        fh.seek(0)
        if size == 0:
            raise InputError("empty file", where=where, expected=f"a {what}")
        inner: IO[bytes] = gzip.GzipFile(fileobj=fh, mode="rb") if gzipped else fh  # type: ignore[assignment]
        stream = TraceStream(inner, where=where, max_bytes=max_bytes)
        if not stream.head(1):
            raise InputError("empty file once decompressed", where=where, expected=f"a {what}")
        yield stream


def parse_json(data: bytes, *, where: str, expected: str) -> dict[str, Any]:
    """A JSON object from ``data``; broken or truncated JSON and a non-object are one error line."""
    try:
        doc = json.loads(data)
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", where=where, expected=expected) from None
    except json.JSONDecodeError as exc:
        ended = exc.pos >= len(data.rstrip()) or exc.msg.startswith("Unterminated string")  # ran out of text
        what = "truncated JSON" if ended else f"invalid JSON ({exc.msg})"
        raise InputError(what, where=f"{where}:{exc.lineno}", expected=expected) from None
    except RecursionError:
        raise InputError("JSON nested too deeply", where=where, expected=expected) from None
    if not isinstance(doc, dict):
        raise InputError(f"a JSON {type(doc).__name__}, not an object", where=where, expected=expected)
    return doc
