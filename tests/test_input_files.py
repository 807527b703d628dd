"""Untrusted files are read one way: regular files only, bytes and depth bounded as read."""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

import pytest

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.inputs import (
    read_bounded,
    read_bounded_json,
    read_bounded_lines,
    read_bounded_text,
)
from corrective_rag.inputs.files import json_depth


def test_device_is_refused_without_reading_it() -> None:
    """/dev/zero claims size 0 and never ends: refused as a device, not read."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InputError, match=r"^/dev/zero: a device, not a regular file$"):
        read_bounded("/dev/zero", max_bytes=1_000_000)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert after - before < 50_000  # kilobytes: nothing of the device was held


@pytest.mark.skipif(sys.platform == "win32", reason="no FIFOs")
def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    """A FIFO with no writer would block a plain open(): it is refused at once."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="a pipe, not a regular file"):
        read_bounded(fifo, max_bytes=10)


def test_folder_and_missing_file(tmp_path: Path) -> None:
    """A folder and a missing file each get one line naming them."""
    with pytest.raises(InputError, match="a folder, not a regular file"):
        read_bounded(tmp_path, max_bytes=10)
    with pytest.raises(InputError, match="no such file"):
        read_bounded(tmp_path / "absent", max_bytes=10)


def test_cap_counts_bytes_read_not_claimed(tmp_path: Path) -> None:
    """A file exactly at the cap is read; one byte more is refused."""
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert b"x" * 100 == read_bounded(path, max_bytes=100)
    with pytest.raises(InputError, match="larger than 99 bytes"):
        read_bounded(path, max_bytes=99)


def test_error_class_is_the_callers(tmp_path: Path) -> None:
    """A caller reading settings gets a ConfigError instead."""
    with pytest.raises(ConfigError):
        read_bounded(tmp_path / "absent", max_bytes=10, error=ConfigError)


def test_text_not_utf8_and_bom(tmp_path: Path) -> None:
    """Invalid UTF-8 is one line naming the byte; a byte order mark is dropped."""
    path = tmp_path / "t"
    path.write_bytes(b"ok \xff")
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 3\)"):
        read_bounded_text(path, max_bytes=100)
    path.write_bytes(b"\xef\xbb\xbfhello")
    assert "hello" == read_bounded_text(path, max_bytes=100)


def test_json_depth_bounded_before_parsing(tmp_path: Path) -> None:
    """500,000 brackets are refused by depth, not by a RecursionError."""
    path = tmp_path / "deep.json"
    path.write_bytes(b"[" * 500_000)
    with pytest.raises(InputError, match="nested deeper than 64"):
        read_bounded_json(path, max_bytes=1_000_000)
    path.write_bytes(b'{"a": [1, {"b": "[[[[[["}]}')
    assert {"a": [1, {"b": "[[[[[["}]} == read_bounded_json(path, max_bytes=100, max_depth=3)


@pytest.mark.parametrize(
    ("raw", "depth"),
    [
        (b"", 0),
        (b"1", 0),
        (b"{}", 1),
        (b"[[]]", 2),
        (b'["]]]", [1]]', 2),
        (b'["\\"[", [[1]]]', 3),
        (b'["\\\\", [2]]', 2),
        (b'"unterminated [[[', 0),
    ],
)
def test_json_depth_skips_strings(raw: bytes, depth: int) -> None:
    """Brackets inside strings (escaped quotes included) do not count."""
    assert depth == json_depth(raw)


def test_json_not_json(tmp_path: Path) -> None:
    """Text that is not JSON, or an integer past Python's digit limit, is one line."""
    path = tmp_path / "bad.json"
    path.write_text("{nope")
    with pytest.raises(InputError, match=r"bad.json: not valid JSON"):
        read_bounded_json(path, max_bytes=100)
    path.write_text("1" * 5000)
    with pytest.raises(InputError, match=r"bad.json: not valid JSON"):
        read_bounded_json(path, max_bytes=10_000)


def test_lines_bounded_each(tmp_path: Path) -> None:
    """A long line is refused by number before it is held whole; blank lines are skipped."""
    path = tmp_path / "p.jsonl"
    path.write_bytes(b"\xef\xbb\xbf{}\n\n" + b"x" * 5000 + b"\n{}")
    lines = read_bounded_lines(path, max_bytes=100_000, max_line_bytes=1000)
    assert (1, b"{}") == next(lines)
    with pytest.raises(InputError, match="line 3 longer than 1,000 bytes"):
        next(lines)
    path.write_bytes(b"a\r\nb")
    assert [(1, b"a"), (2, b"b")] == list(
        read_bounded_lines(path, max_bytes=100, max_line_bytes=10)
    )
    with pytest.raises(InputError, match="larger than 3 bytes"):
        list(read_bounded_lines(path, max_bytes=3, max_line_bytes=10))


def test_a_file_must_begin_as_its_kind_before_it_is_read_whole(tmp_path: Path) -> None:
    """``start``: a file of the package's own kind is read; any other is refused at its first
    bytes, whatever the (large) cap."""
    path = tmp_path / "snapshot.json"
    path.write_bytes(b'{"format": 1}')
    assert {"format": 1} == read_bounded_json(path, max_bytes=1 << 30, start=b'{"format": ')
    path.write_bytes(b"\0" * 1_000_000)
    with pytest.raises(InputError, match=r"snapshot\.json: not a file of this kind"):
        read_bounded(path, max_bytes=1 << 30, start=b'{"format": ')
    path.write_bytes(b"{")  # shorter than the start
    with pytest.raises(InputError, match="not a file of this kind"):
        read_bounded(path, max_bytes=100, start=b'{"format": ')


def test_lines_with_their_ends_for_append_only_files(tmp_path: Path) -> None:
    """``ends``: every line as read, blank ones and the newline kept, so that a last line
    without one (a write cut short) shows, and bytes can be counted."""
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"a\n\nb\r\ntorn")
    assert [(1, b"a\n"), (2, b"\n"), (3, b"b\r\n"), (4, b"torn")] == list(
        read_bounded_lines(path, max_bytes=100, max_line_bytes=10, ends=True)
    )


@pytest.mark.skipif(sys.platform == "win32", reason="no FIFOs")
def test_open_regular_streams_a_file_and_refuses_a_fifo(tmp_path: Path) -> None:
    """For a caller that streams (a corpus): a regular file opened, a FIFO refused unopened."""
    from corrective_rag.inputs import open_regular

    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * 100_000)
    with open_regular(path) as fh:
        assert b"x" * 10 == fh.read(10)
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(InputError, match="a pipe, not a regular file"):
        open_regular(tmp_path / "pipe")
