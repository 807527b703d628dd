"""The one way to read a file the package did not just write: bounded, regular, one-line errors.

Every file a user, a cache folder or another process can hand the package (labelled pairs, a
judge profile, an export record, queries, settings) is untrusted. What goes wrong with a plain
``open().read()``, and what this module does instead:

* ``st_size`` is 0 for a device (``/dev/zero`` reads forever) and a FIFO blocks the opener until
  a writer comes: the file is opened non-blocking and refused unless ``fstat`` says it is a
  regular file; the bytes are bounded *as they are read* (one more than the cap is read, so an
  oversized file is told from one exactly at the cap), never by the size it claims.
* a line of 200 MB in a JSON Lines file is read whole before any length check: lines are read
  with a cap each (:func:`read_bounded_lines`).
* bytes that are not UTF-8 raise ``UnicodeDecodeError`` and 500,000 ``[`` raise
  ``RecursionError`` deep inside ``json``: the text is decoded here and the nesting measured in
  one linear pass before ``json.loads`` runs (:func:`read_bounded_json`).

Each refusal is one :class:`~corrective_rag.errors.InputError` (or the ``error`` the caller
names) whose message starts with the file's name. A UTF-8 byte order mark (Notepad,
PowerShell) is read as what it is, not as text.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from typing import Any, BinaryIO

from corrective_rag.errors import CorrectiveRAGError, InputError

# open_regular, read_bounded, read_bounded_json, read_bounded_lines, read_bounded_text: their
# home is corrective_rag.inputs
__all__: list[str] = []

MAX_JSON_DEPTH = 64  # a settings or profile file nests a few levels; json.loads recurses per level
_CHUNK = 1 << 16
_BOM = b"\xef\xbb\xbf"
# a JSON string, escapes included: removed before the brackets are counted, so that a bracket
# inside a string does not count toward the nesting
# (an unterminated one runs to the end, so no quote is scanned from twice: linear on any text)
_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _shown(path: str | os.PathLike[str]) -> str:
    """The file's name as a one-line message can carry it (control characters escaped)."""
    name = os.fsdecode(path)
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in name)


def _open(path: str | os.PathLike[str], error: type[CorrectiveRAGError]) -> int:
    """A read-only descriptor of a regular file; anything else is refused with ``error``."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise error(f"{_shown(path)}: no such file") from None
    except OSError as exc:
        raise error(f"{_shown(path)}: cannot open ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:  # pragma: no cover - fstat of a descriptor just opened
        os.close(fd)
        raise error(f"{_shown(path)}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = (
            "a folder"
            if stat.S_ISDIR(mode)
            else "a pipe"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file"
        )
        raise error(f"{_shown(path)}: {kind}, not a regular file")
    return fd


def open_regular(
    path: str | os.PathLike[str], *, error: type[CorrectiveRAGError] = InputError
) -> BinaryIO:
    """The regular file at ``path`` opened for reading in binary, for a caller that streams it.

    For a reader of files too large to hold (a corpus of gigabytes, read in blocks): the file
    is opened as :func:`read_bounded` opens it (without blocking on a FIFO, and refused unless
    it is a regular file); bounding what is read is the caller's.

    Raises:
        CorrectiveRAGError: ``error`` as :func:`read_bounded`: missing, unreadable or not a
            regular file.
    """
    fd = _open(path, error)
    if getattr(os, "O_NONBLOCK", 0):  # opened so only to pass a FIFO: a regular file never waits
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb", buffering=_CHUNK)


def _too_large(path: str | os.PathLike[str], max_bytes: int) -> str:
    return f"{_shown(path)}: larger than {max_bytes:,} bytes"


def read_bounded(
    path: str | os.PathLike[str],
    *,
    max_bytes: int,
    error: type[CorrectiveRAGError] = InputError,
    start: bytes = b"",
) -> bytes:
    """The bytes of the regular file at ``path``, at most ``max_bytes`` of them.

    ``start``: the bytes a file of this kind begins with (one the package writes itself, such
    as a store's snapshot, whose cap must be large): a file that begins otherwise is refused
    as soon as those bytes are read, never read whole.

    Raises:
        CorrectiveRAGError: ``error`` (:class:`InputError` by default), one line naming the
            file: missing, unreadable, not a regular file (a folder, FIFO, device), more than
            ``max_bytes`` bytes long, or not beginning with ``start``.
    """
    fd = _open(path, error)
    parts: list[bytes] = []
    got = 0
    try:
        while got <= max_bytes:
            try:
                part = os.read(fd, min(_CHUNK, max_bytes + 1 - got))
            except OSError as exc:
                raise error(f"{_shown(path)}: cannot read ({exc.strerror or exc})") from None
            parts.append(part)
            got += len(part)
            if start and (got >= len(start) or not part):
                head = b"".join(parts)[: len(start)]
                if head != start:
                    raise error(
                        f"{_shown(path)}: not a file of this kind (it does not begin as one)"
                    )
                start = b""
            if not part:
                break
    finally:
        os.close(fd)
    if got > max_bytes:
        raise error(_too_large(path, max_bytes))
    return b"".join(parts)


def _decoded(raw: bytes, where: str, error: type[CorrectiveRAGError]) -> str:
    if raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 text (byte {exc.start})") from None


def read_bounded_text(
    path: str | os.PathLike[str],
    *,
    max_bytes: int,
    error: type[CorrectiveRAGError] = InputError,
) -> str:
    """The file's UTF-8 text (a byte order mark dropped), bounded as :func:`read_bounded`.

    Raises:
        CorrectiveRAGError: ``error`` as :func:`read_bounded`, or the bytes are not UTF-8.
    """
    return _decoded(read_bounded(path, max_bytes=max_bytes, error=error), _shown(path), error)


def json_depth(raw: bytes) -> int:
    """How deeply the JSON text ``raw`` nests arrays and objects, in one linear pass.

    Brackets inside strings do not count; unbalanced text is measured as far as it goes (the
    parser refuses it afterwards).
    """
    brackets = _STRINGS.sub(b"", raw).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    import numpy as np

    steps = np.frombuffer(brackets, dtype=np.uint8)
    depth = np.cumsum(np.where((steps == ord("[")) | (steps == ord("{")), 1, -1))
    return int(depth.max())


def loads_bounded(
    raw: bytes,
    where: str,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    error: type[CorrectiveRAGError] = InputError,
) -> Any:
    """``json.loads`` of untrusted bytes, every failure one ``error`` naming ``where``."""
    text = _decoded(raw, where, error)
    if (raw.count(b"[") + raw.count(b"{")) > max_depth and json_depth(raw) > max_depth:
        raise error(f"{where}: JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    except (ValueError, RecursionError) as exc:  # an integer past int_max_str_digits
        raise error(f"{where}: not valid JSON ({type(exc).__name__})") from None


def read_bounded_json(
    path: str | os.PathLike[str],
    *,
    max_bytes: int,
    max_depth: int = MAX_JSON_DEPTH,
    error: type[CorrectiveRAGError] = InputError,
    start: bytes = b"",
) -> Any:
    """The file's JSON value, bounded in bytes (:func:`read_bounded`) and in nesting depth.

    Raises:
        CorrectiveRAGError: ``error`` as :func:`read_bounded_text`, or the text is not JSON or
            nests deeper than ``max_depth``.
    """
    raw = read_bounded(path, max_bytes=max_bytes, error=error, start=start)
    return loads_bounded(raw, _shown(path), max_depth=max_depth, error=error)


def read_bounded_lines(
    path: str | os.PathLike[str],
    *,
    max_bytes: int,
    max_line_bytes: int,
    error: type[CorrectiveRAGError] = InputError,
    ends: bool = False,
) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes)`` for each non-blank line, no line read past ``max_line_bytes``.

    The line's newline is dropped; the first line's byte order mark too. Reading stops with an
    error as soon as a line passes its cap or the file passes ``max_bytes``, before either is
    held in memory whole. With ``ends``, every line comes as read, its line ending kept and
    blank lines too (for an append-only file, whose last line without a newline is a write cut
    short, and whose readers count bytes).

    Raises:
        CorrectiveRAGError: ``error`` as :func:`read_bounded`, or a line longer than
            ``max_line_bytes`` (naming the line).
    """
    with open_regular(path, error=error) as fh:
        total = 0
        number = 0
        while True:
            try:
                line = fh.readline(max_line_bytes + 2)
            except OSError as exc:
                raise error(f"{_shown(path)}: cannot read ({exc.strerror or exc})") from None
            if not line:
                return
            number += 1
            total += len(line)
            if total > max_bytes:
                raise error(_too_large(path, max_bytes))
            body = line.rstrip(b"\r\n") if line.endswith(b"\n") else line
            if len(body) > max_line_bytes:
                raise error(f"{_shown(path)}: line {number} longer than {max_line_bytes:,} bytes")
            if ends:
                body = line
            if number == 1 and body.startswith(_BOM):
                body = body[len(_BOM) :]
            if ends or body.strip():
                yield number, body
