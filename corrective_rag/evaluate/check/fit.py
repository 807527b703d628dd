"""A judge's scores against known answers: AUC, the F1-best threshold, and the file keeping it.

``judge-check`` fits a threshold on part of the labelled pairs (:func:`fit_threshold`), reports
F1 at it on the rest, and writes it (:func:`write_threshold`) where the CLI reads it back for
the same model (:func:`read_threshold`) and hands it to ``LLMEvaluator(threshold=...)``. The
maths is pure; the file is JSON, one entry per model and judge, written atomically.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corrective_rag.errors import ConfigError

__all__ = [
    "CALIBRATION_FILE",
    "auc",
    "f1_at",
    "fit_threshold",
    "read_threshold",
    "write_threshold",
]

CALIBRATION_FILE = "judge-calibration.json"  # under the CLI's config folder
_MOST_BYTES = 1_000_000  # a calibration file is a few entries; a larger one is not ours


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Probability that a relevant pair scores above an irrelevant one (ties count half).

    ``None`` when either class is absent (no ranking to measure).
    """
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def f1_at(scores: Sequence[float], labels: Sequence[bool], threshold: float) -> float:
    """F1 of calling relevant every pair scoring ``threshold`` or more (0 when none is right)."""
    tp = sum(1 for s, y in zip(scores, labels, strict=True) if s >= threshold and y)
    fp = sum(1 for s, y in zip(scores, labels, strict=True) if s >= threshold and not y)
    fn = sum(1 for s, y in zip(scores, labels, strict=True) if s < threshold and y)
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def fit_threshold(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """The threshold with the best F1 on these pairs; ties go to the higher (fewer kept).

    Candidates are midpoints between neighbouring distinct scores (and the ends), so a
    threshold never sits exactly on a fitted pair's score; kept within (0, 1).
    """
    distinct = sorted(set(scores))
    if not distinct:
        raise ConfigError("no scores to fit a threshold on")
    cuts = [distinct[0] / 2]
    cuts += [(a + b) / 2 for a, b in itertools.pairwise(distinct)]
    cuts.append((distinct[-1] + 1) / 2)
    best = max(cuts, key=lambda t: (round(f1_at(scores, labels, t), 12), t))
    return min(max(best, 1e-4), 1 - 1e-4)


def _entries(path: Path) -> dict[str, Any]:
    try:
        if path.stat().st_size > _MOST_BYTES:
            raise ConfigError(f"{path}: larger than a calibration file can be")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable calibration file ({exc})") from exc
    judges = data.get("judges") if isinstance(data, dict) else None
    return judges if isinstance(judges, dict) else {}


def read_threshold(path: str | Path, model: str, judge: str = "logprob") -> float | None:
    """The threshold ``judge-check`` fitted for ``model``'s ``judge``, or None when there is none.

    Raises:
        ConfigError: the file exists but is not a calibration file.
    """
    entry = _entries(Path(path)).get(f"{model}\t{judge}")
    value = entry.get("threshold") if isinstance(entry, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and 0.0 < value < 1.0 else None


def write_threshold(
    path: str | Path, model: str, judge: str, threshold: float, **figures: Any
) -> None:
    """Keep ``threshold`` (and ``figures``) for ``model``'s ``judge``; other entries stay."""
    if not 0.0 < threshold < 1.0:
        raise ConfigError(f"threshold must be in (0, 1), got {threshold!r}")
    target = Path(path)
    judges = _entries(target)
    judges[f"{model}\t{judge}"] = {"threshold": threshold, **figures}
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".calibration-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"version": 1, "judges": judges}, out, indent=2, sort_keys=True)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
