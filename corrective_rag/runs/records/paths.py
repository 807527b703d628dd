"""Output paths that cannot destroy a user's file: never one of the command's own inputs.

:func:`check_output` is called before anything is written. It refuses an output that is the same
file as an input or as another output of the same command, however it is spelled (relative or
absolute, through a symbolic link, or as a hard link to the same inode), an output that is a
folder, and an output whose folder does not exist (a typo must not create folders silently).
"""

from __future__ import annotations

import os
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
        InputError: ``out`` is the same file as an input or another output, is a folder, or
            its folder does not exist (with ``folder_must_exist``).
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
    folder = path.parent
    if folder_must_exist and not folder.is_dir():
        raise InputError(f"{what}: folder {folder} does not exist (create it first)")
