"""A judge as one declared thing: which judge, for which model, prompt and call, at which threshold.

``judge-check --compare`` measures every judge a user can run on labelled pairs and writes what
it measured to a *profile file*, one :class:`JudgeProfile` per model and judge kind, and which
one it chose. Every entry point then runs exactly that judge: the library
(:meth:`JudgeProfile.read`, then :meth:`JudgeProfile.evaluator`), ``run``/``batch``/``mcp``
(``--calibration FILE``, ``--judge KIND``), Ray workers (the profile travels with the options)
and both framework retrievers (``CorrectiveRetriever.from_profile``). A profile measured for
another model, another prompt or another call shape is refused with one line saying which::

    profile = JudgeProfile.read("judge-profile.json", model="my-model")
    evaluator = profile.evaluator(chat=chat) if profile else LLMEvaluator(chat)

The kinds are a small table (:data:`JUDGE_KINDS`): how each is built, whether it takes a
threshold, which prompt it sends and in which call shape. The file is JSON::

    {"format": "corrective-rag judge profiles", "version": 2,
     "models": {"MODEL": {"chosen": "logprob" | null,
                          "judges": {"logprob": {PROFILE}, "verbal": {PROFILE}, ...}}}}

where ``PROFILE`` holds :class:`JudgeProfile`'s fields and ``measured`` :class:`Measured`'s.
It is read only through :func:`corrective_rag.inputs.read_bounded_json` (bounded bytes and
depth, regular files only, one line naming the file) and written atomically (a temporary file
renamed over it; a symlink is written through to its target, never replaced).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.kinds import CALL_SHAPES, JUDGE_KINDS, NOT_HERE, judge_kind
from corrective_rag.evaluate.profile_file import read_entries, write_entries
from corrective_rag.evaluate.scoring import check_threshold
from corrective_rag.observe.logs import get_logger
from corrective_rag.protocols import ChatModel, Evaluator

# JudgeProfile: its home is corrective_rag.evaluate
__all__ = ["PROFILE_FILE", "Measured", "read_profiles", "write_profiles"]

log: Any = get_logger(__name__)

PROFILE_FILE = "judge-calibration.json"  # under the CLI's config folder
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Measured:
    """What a profile was measured on, and how well the judge did there (held out).

    Attributes:
        pairs: labelled pairs graded.
        source: where they came from: ``"built-in"`` or the pairs file's name.
        held_out_pairs: pairs the figures are reported on (the threshold was fitted on the
            others' questions).
        held_out_f1: F1 of the documents a run keeps (the filter policy's decisions) on them.
        auc: how well the judge's scores rank them (``None``: one class only).
        trivial_f1: F1 of keeping every held-out pair, beside it.
        date: when (ISO 8601, UTC).
        version: the package version that measured it.
        partial: the check stopped early (deadline, Ctrl-C): figures on what was graded.
    """

    pairs: int
    source: str
    held_out_pairs: int
    held_out_f1: float
    auc: float | None
    trivial_f1: float
    date: str
    version: str
    partial: bool = False


@dataclass(frozen=True, slots=True)
class JudgeProfile:
    """One judge, declared: its kind, for which model, prompt and call shape, at which threshold.

    Attributes:
        kind: a key of :data:`JUDGE_KINDS` (``"verbal"``, ``"logprob"``, ``"pointwise"``,
            ``"offline"``, ``"learned"``).
        model: the model it was measured with (the name sent to the server; for
            ``--local-llm`` the GGUF file's name).
        prompt_version: the prompt and schema the judge sends (:attr:`JudgeKind.prompt`).
        call_shape: one of :data:`CALL_SHAPES`.
        threshold: where the judge's probability makes a verdict relevant (kinds that take
            one); ``None`` for the others.
        policy: the filter policy the figures were measured under (the keep decisions counted).
        measured: what it was measured on; ``None`` for a judge named but not measured.
        judge_file: the judge's own weights, for a kind trained on a user's pairs
            (``judge-check --train`` writes the learned judge's beside the profile file, which
            names it relative to its own folder); ``None``: the weights it ships with.
        judge_sha256: that file's SHA-256 (hex): a file changed since it was measured is
            refused when the judge is built.

    Raises:
        ConfigError: an unknown kind or call shape, or a threshold where the kind takes none
            (or none where it takes one), or one outside (0, 1); a judge file for a kind that
            takes none, or one without its SHA-256.
    """

    kind: str
    model: str
    prompt_version: str
    call_shape: str
    threshold: float | None = None
    policy: str = "general"
    measured: Measured | None = None
    judge_file: str | None = None
    judge_sha256: str | None = None

    def __post_init__(self) -> None:
        kind = JUDGE_KINDS.get(self.kind) if isinstance(self.kind, str) else None
        if kind is None:
            raise ConfigError(
                f"unknown judge kind {self.kind!r}; choose one of {', '.join(JUDGE_KINDS)}"
            )
        if self.call_shape not in CALL_SHAPES:
            raise ConfigError(
                f"unknown call shape {self.call_shape!r}; one of {', '.join(CALL_SHAPES)}"
            )
        for name in ("model", "prompt_version", "policy"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"judge profile {name} must be a string")
        if kind.thresholded != (self.threshold is not None):
            wants = "a threshold" if kind.thresholded else "no threshold"
            raise ConfigError(f"the {self.kind} judge takes {wants}, got {self.threshold!r}")
        if self.threshold is not None:
            check_threshold(self.threshold)
            object.__setattr__(self, "threshold", float(self.threshold))
        if (self.judge_file is None) != (self.judge_sha256 is None):
            raise ConfigError(
                "a judge profile names its judge file and the file's SHA-256 together"
            )
        if self.judge_file is not None:
            if not kind.trainable:
                raise ConfigError(f"the {self.kind} judge takes no judge file")
            if not isinstance(self.judge_file, str) or not self.judge_file.strip():
                raise ConfigError("judge profile judge_file must be a file's path")
            if not isinstance(self.judge_sha256, str) or not _SHA256.fullmatch(self.judge_sha256):
                raise ConfigError("judge profile judge_sha256 must be 64 hex digits")

    @classmethod
    def of(
        cls,
        kind: str,
        *,
        model: str,
        call_mode: str = "one-call",
        threshold: float | None = None,
        policy: str = "general",
    ) -> JudgeProfile:
        """The judge ``kind`` for ``model``, unmeasured, in the call a loop in ``call_mode`` makes.

        A kind that takes a threshold gets its default (0.5, or the threshold fitted with the
        learned judge's shipped weights) unless ``threshold`` says otherwise.
        """
        spec = judge_kind(kind)
        if spec.thresholded and threshold is None:
            threshold = spec.default_threshold()
        return cls(
            kind,
            model,
            spec.prompt(),
            spec.shape(call_mode),
            threshold if spec.thresholded else None,
            policy,
        )

    @property
    def description(self) -> str:
        """One line: kind, call shape and threshold (``"logprob, one-call, threshold 0.412"``)."""
        parts = [self.kind]
        if self.call_shape not in (self.kind, "offline"):
            parts.append(self.call_shape)
        if self.threshold is not None:
            parts.append(f"threshold {self.threshold:.3f}")
        if self.judge_file is not None:
            parts.append("trained on your pairs")
        return ", ".join(parts)

    def check(self, *, model: str | None = None, call_mode: str | None = None) -> None:
        """Refuse this profile where it was not measured: another model, prompt or call shape.

        Args:
            model: the model the run talks to (``None``: not checked, as for the offline judge).
            call_mode: the loop's call mode (``"one-call"`` / ``"two-call"``; ``None``: the one
                the profile was measured in).

        Raises:
            ConfigError: one line saying which differs.
        """
        spec = judge_kind(self.kind)
        if not spec.available:
            raise ConfigError(NOT_HERE.format(kind=self.kind))
        if model is not None and spec.needs_chat and model != self.model:
            raise ConfigError(
                f"the {self.kind} judge profile was measured for model {self.model!r}, "
                f"not {model!r}: run judge-check --model {model}"
            )
        prompt = spec.prompt()
        if prompt != self.prompt_version:
            raise ConfigError(
                f"the {self.kind} judge profile was measured with prompt {self.prompt_version}; "
                f"this version sends {prompt}: run judge-check again"
            )
        if call_mode is not None and spec.shape(call_mode) != self.call_shape:
            raise ConfigError(
                f"the {self.kind} judge profile was measured in the {self.call_shape} call; "
                f"this loop makes the {spec.shape(call_mode)} call"
            )

    def evaluator(
        self,
        *,
        chat: ChatModel | None = None,
        store: Any = None,
        call_mode: str | None = None,
        model: str | None = None,
        **options: Any,
    ) -> Evaluator:
        """The evaluator this profile declares, built as it was measured (checked first).

        Args:
            chat: the chat model (every kind but ``offline``).
            store: a :class:`~corrective_rag.store.hybrid.HybridStore` whose embedder and idf
                the offline judge uses (``None``: its defaults).
            call_mode: the loop's call mode; ``None``: the one the profile was measured in.
            model: the model ``chat`` talks to (default ``chat.model``): refused when it is not
                the one measured.
            options: passed to the evaluator (``max_workers``, ``context_tokens``, ``cache``
                ...).

        Raises:
            ConfigError: the profile does not fit (:meth:`check`), or the kind needs a chat
                model and got none, or cannot be built here.
        """
        spec = judge_kind(self.kind)
        if spec.needs_chat and chat is None:
            raise ConfigError(f"the {self.kind} judge needs a chat model (chat=...)")
        if model is None and chat is not None:
            model = str(getattr(chat, "model", "") or "") or None
        self.check(model=model, call_mode=call_mode)
        return spec.build(self, chat, store, dict(options))

    @classmethod
    def read(
        cls,
        path: str | os.PathLike[str],
        *,
        model: str,
        kind: str | None = None,
        required: bool = True,
    ) -> JudgeProfile | None:
        """The profile ``judge-check`` chose for ``model`` in the file (or its entry ``kind``).

        Args:
            path: the profile file.
            model: the model the run talks to.
            kind: the entry of this kind instead of the chosen one (``None``: the chosen one,
                if any).
            required: a missing file, or no entry for ``model``, is an error (the user named
                the file); ``False``: ``None`` then (a default location).

        Raises:
            ConfigError: the file cannot be read or is not a profile file (one line naming it);
                or, when ``required``, it holds nothing for ``model``.
        """
        if not required and not os.path.lexists(path):
            return None
        models = read_profiles(path)
        entry = models.get(model)
        where = os.fsdecode(path)
        if entry is None:
            if not required:
                return None
            others = ", ".join(sorted(models)[:5]) or "no model"
            raise ConfigError(
                f"{where}: no judge profile for model {model!r} (it holds {others}): "
                f"run judge-check --model {model} --calibration {where}"
            )
        judges, chosen = entry
        name = kind or chosen
        if name is None:
            if required and kind is None:
                raise ConfigError(
                    f"{where}: judge-check chose no judge for model {model!r} (its last check "
                    "failed or was stopped): name one with --judge KIND"
                )
            return None
        profile = judges.get(name)
        if profile is None and required:
            raise ConfigError(f"{where}: no {name} judge measured for model {model!r}")
        return profile


# -- the file: each entry converted here, the file read and written by profile_file ---------

Entries = dict[str, tuple[dict[str, JudgeProfile], str | None]]  # model -> (judges, chosen)


def _measured(data: object, where: str) -> Measured | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: 'measured' must be an object")
    names = {f.name for f in dataclasses.fields(Measured)}
    try:
        measured = Measured(**{k: v for k, v in data.items() if k in names})
    except TypeError as exc:
        raise ConfigError(f"{where}: 'measured' lacks a field ({exc})") from None
    for name in ("pairs", "held_out_pairs"):
        value = getattr(measured, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{where}: measured {name} must be a count")
    for name in ("held_out_f1", "trivial_f1", "auc"):
        value = getattr(measured, name)
        if value is None and name == "auc":
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not (math.isfinite(value) and 0.0 <= value <= 1.0)
        ):
            raise ConfigError(f"{where}: measured {name} must be a number in 0..1")
    for name in ("source", "date", "version"):
        if not isinstance(getattr(measured, name), str):
            raise ConfigError(f"{where}: measured {name} must be a string")
    if not isinstance(measured.partial, bool):
        raise ConfigError(f"{where}: measured partial must be true or false")
    return measured


def _profile(data: object, where: str, folder: str) -> JudgeProfile:
    """One entry; a relative ``judge_file`` is resolved against the profile file's ``folder``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a judge profile must be an object")
    names = {f.name for f in dataclasses.fields(JudgeProfile)} - {"measured"}
    fields = {k: v for k, v in data.items() if k in names}
    named = fields.get("judge_file")
    if isinstance(named, str) and named.strip() and not os.path.isabs(named):
        fields["judge_file"] = os.path.join(folder, named)
    try:
        return JudgeProfile(**fields, measured=_measured(data.get("measured"), where))
    except TypeError as exc:
        raise ConfigError(f"{where}: a judge profile lacks a field ({exc})") from None
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def read_profiles(path: str | os.PathLike[str]) -> Entries:
    """Every model's judge profiles in the file, and the kind chosen for each (or None).

    Raises:
        ConfigError: the file cannot be read or is not a profile file (one line naming it).
    """
    where = os.fsdecode(path)
    folder = _folder(where)
    out: Entries = {}
    for model, (raw, chosen) in read_entries(path).items():
        at = f"{where}: model {model!r}"
        judges = {}
        for kind, data in raw.items():
            profile = _profile(data, f"{at}, {kind}", folder)
            if profile.kind != kind or profile.model != model:
                raise ConfigError(f"{at}, {kind}: the entry names another kind or model")
            judges[kind] = profile
        out[model] = (judges, chosen)
    return out


def write_profiles(
    path: str | os.PathLike[str],
    model: str,
    profiles: Mapping[str, JudgeProfile],
    chosen: str | None,
) -> str:
    """Keep ``profiles`` for ``model`` and which one is ``chosen`` (None: none); return the path.

    The model's earlier entries of other kinds stay, and so do other models'; its choice is
    replaced (``None`` clears it: a failed or stopped check leaves nothing chosen). Written
    atomically beside the file's target (a symlink is written through, not replaced).

    Raises:
        ConfigError: the existing file is not a profile file, or the folder cannot be written
            (one line naming it).
    """
    for kind, profile in profiles.items():
        if profile.kind != kind or profile.model != model:
            raise ConfigError(f"profile {kind!r} is not the {kind} judge of {model!r}")
    if chosen is not None and chosen not in profiles:
        raise ConfigError(f"chosen judge {chosen!r} has no profile")
    folder = _folder(os.fsdecode(path))
    entries = {}
    for kind, p in profiles.items():
        entry = dataclasses.asdict(p)
        named = entry.get("judge_file")
        if named is not None and os.path.dirname(os.path.realpath(named)) == folder:
            entry["judge_file"] = os.path.basename(named)  # the two move together
        entries[kind] = entry
    written = write_entries(path, model, entries, chosen)
    log.info("judge_profile_written", path=written, model=model, chosen=chosen)
    return written


def _folder(path: str) -> str:
    """The folder of the file a profile file's path names (a symlink's target's)."""
    return os.path.dirname(os.path.realpath(path))
