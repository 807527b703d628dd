"""The judge profile file on disk: read bounded, written atomically, a symlink written through.

The file's layout (:mod:`corrective_rag.evaluate.profile` turns each entry into a
:class:`~corrective_rag.evaluate.profile.JudgeProfile`)::

    {"format": "corrective-rag judge profiles", "version": 2,
     "models": {"MODEL": {"chosen": "logprob" | null, "judges": {"logprob": {...}, ...}}}}

It is read only through :func:`corrective_rag.inputs.read_bounded_json` (bytes bounded as read,
regular files only, JSON depth bounded, one line naming the file: ``/dev/zero``, a FIFO, deep
nesting and invalid UTF-8 each end in one :class:`~corrective_rag.errors.ConfigError`). Writing
replaces one model's entries: a temporary file beside the target, renamed over it, so that a
reader sees the old file or the new one; a symlinked file is written through to its target.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.inputs import read_bounded_json

__all__ = ["FORMAT", "VERSION", "read_entries", "write_entries", "write_judge_file"]

FORMAT = "corrective-rag judge profiles"
VERSION = 2
_MOST_BYTES = 1_000_000  # a profile file holds a few entries per model; a larger one is not ours

RawEntries = dict[str, tuple[dict[str, Any], str | None]]  # model -> (kind -> entry, chosen)


def read_entries(path: str | os.PathLike[str]) -> RawEntries:
    """Each model's entries (kind -> its JSON object) and the kind chosen (or None).

    A file of the first format (``version`` 1: thresholds only, written before profiles
    existed, measured under another meaning of the score) holds no profile: it reads as empty,
    and the next ``judge-check`` replaces it.

    Raises:
        ConfigError: the file cannot be read or is not a profile file (one line naming it).
    """
    where = os.fsdecode(path)
    data = read_bounded_json(path, max_bytes=_MOST_BYTES, error=ConfigError)
    if isinstance(data, dict) and data.get("version") == 1 and "judges" in data:
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError(f"{where}: not a judge profile file (judge-check writes them)")
    if data.get("version") != VERSION:
        raise ConfigError(f"{where}: judge profile version {data.get('version')!r}, not {VERSION}")
    models = data.get("models")
    if not isinstance(models, dict):
        raise ConfigError(f"{where}: 'models' must be an object")
    out: RawEntries = {}
    for model, entry in models.items():
        at = f"{where}: model {model!r}"
        if not isinstance(entry, dict) or not isinstance(entry.get("judges"), dict):
            raise ConfigError(f"{at}: needs 'judges'")
        chosen = entry.get("chosen")
        if chosen is not None and chosen not in entry["judges"]:
            raise ConfigError(f"{at}: chosen judge {chosen!r} is not among its judges")
        out[model] = (dict(entry["judges"]), chosen)
    return out


def write_entries(
    path: str | os.PathLike[str],
    model: str,
    entries: Mapping[str, Any],
    chosen: str | None,
) -> str:
    """Put ``entries`` (kind -> JSON object) and ``chosen`` for ``model``; return the path.

    Raises:
        ConfigError: the existing file is not a profile file, or the folder cannot be written.
    """
    given = os.fsdecode(path)
    target = Path(os.path.realpath(given)) if os.path.islink(given) else Path(given)
    models = read_entries(target) if os.path.lexists(target) else {}
    judges, _ = models.get(model, ({}, None))
    models[model] = ({**judges, **entries}, chosen)
    body = {
        "format": FORMAT,
        "version": VERSION,
        "models": {
            name: {"chosen": pick, "judges": dict(sorted(kinds.items()))}
            for name, (kinds, pick) in sorted(models.items())
        },
    }
    text = json.dumps(body, indent=2, sort_keys=True, allow_nan=False) + "\n"
    _write_atomically(target, text, f"the judge profile {given}")
    return given


def write_judge_file(profile_path: str | os.PathLike[str], kind: str, text: str) -> tuple[str, str]:
    """Write a judge's own weights (``text``) beside the profile file; return (path, SHA-256).

    The file is named after the profile file and the text's hash
    (``judge-calibration.learned-0123456789ab.json``): a new training never overwrites a file
    an older profile names. Written atomically into the folder of the profile file's target.

    Raises:
        ConfigError: the folder cannot be written (one line naming the file).
    """
    given = os.fsdecode(profile_path)
    folder = Path(os.path.realpath(given)).parent
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    stem = Path(given).name.removesuffix(".json")
    target = folder / f"{stem}.{kind}-{digest[:12]}.json"
    _write_atomically(target, text, f"the {kind} judge file {target}")
    return str(target), digest


def _write_atomically(target: Path, text: str, what: str) -> None:
    """``text`` into ``target`` through a temporary file renamed over it.

    A reader sees the old file or the new one, never a part.
    """
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".judge-profile-")
    except OSError as exc:
        raise ConfigError(f"cannot write {what}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ConfigError(f"cannot write {what}: {exc.strerror or exc}") from None
        raise
