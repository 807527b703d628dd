"""Output paths that cannot destroy a user's file: never one of the command's own inputs.

:func:`check_output` is called before anything is written. It refuses an output that is the same
file as an input or as another output of the same command, however it is spelled (relative or
absolute, through a symbolic link, or as a hard link to the same inode), an output that is a
folder, an output that exists and is no regular file (a FIFO blocks the command until a reader
comes, ``/dev/null`` swallows a results file that a resume must read back), and an output whose
folder does not exist (a typo must not create folders silently).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from corrective_rag.errors import InputError

__all__ = ["check_output", "same_file"]

PathLike = str | os.PathLike[str]


def same_file(a: PathLike, b: PathLike) -> bool:
    """True when ``a`` and ``b`` name one file: same inode when both exist, else same real path."""
    pa, pb = Path(a), Path(b)
    try:
        if pa.exists() and pb.exists():
            return os.path.samefile(pa, pb)
    except OSError:
        pass
    return pa.resolve() == pb.resolve()


def check_output(
    out: PathLike,
    *,
    inputs: Iterable[tuple[str, PathLike | None]] = (),
    outputs: Iterable[tuple[str, PathLike | None]] = (),
    what: str = "output",
    folder_must_exist: bool = True,
) -> None:
    """Refuse ``out`` when writing it could destroy something.

    Args:
        out: the file about to be written.
        inputs: ``(name, path)`` pairs this command reads (``None`` paths are skipped).
        outputs: ``(name, path)`` pairs of the command's other outputs.
        what: how to name ``out`` in the message (e.g. ``--csv``).
        folder_must_exist: refuse an output whose folder is missing (the command line's
            rule); library calls that create the folder themselves pass False.

    Raises:
        InputError: ``out`` is the same file as an input or another output, is a folder, is
            no regular file (a FIFO, a device, a socket), or its folder does not exist (with
            ``folder_must_exist``).
    """
    path = Path(out)
    for kind, pairs in (("input", inputs), ("output", outputs)):
        for name, other in pairs:
            if other is not None and same_file(path, other):
                raise InputError(
                    f"{what} {path} is the same file as the {kind} {name} {other}: "
                    "refusing to overwrite it (choose another path)"
                )
    if path.is_dir():
        raise InputError(f"{what} {path} is a folder, not a file")
    special = _special_kind(path)
    if special is not None:
        raise InputError(f"{what} {path} is {special}, not a regular file: write to a file")
    folder = path.parent
    if folder_must_exist and not folder.is_dir():
        raise InputError(f"{what}: folder {folder} does not exist (create it first)")


def _special_kind(path: Path) -> str | None:
    """What an existing ``path`` is when it is no regular file (None: a file, or nothing there).

    ``os.stat`` follows a symbolic link and never opens the path, so a FIFO is not blocked on.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"
