"""``corrective-rag judge-check``: can this model judge, and which judge should a run use?

Plain, it grades the built-in pairs with known answers (:mod:`corrective_rag.evaluate.check`)
with the judge a run would use (the one the profile file chose for ``--model``, ``--judge
KIND``, else the verbal JSON judge), in the run's call, counting what the run's filter policy
keeps; it prints the figures, the judge, call shape and threshold it graded at, and exits 1 with
the reasons when the judge keeps nearly everything (or nothing) or agrees with the known answers
on less than 0.7 of the pairs.

With ``--pairs FILE.jsonl`` (the user's own labelled pairs) or ``--compare`` (the built-in
ones) it measures every judge side by side as a run applies it
(:mod:`corrective_rag.evaluate.check.compare`), prints the figures, then writes each judge's
profile and the one chosen to the profile file (``--calibration``, default
``$CORRECTIVE_RAG_CALIBRATION`` or ``~/.config/corrective-rag/judge-calibration.json``), which
every command reads back for the same model; a check that chose nothing (exit 1), or that was
stopped (deadline, Ctrl-C: the figures so far, marked partial), leaves nothing chosen.

Every mode keeps ``--timeout`` (per call) and ``--deadline`` (the whole check), sends no more
requests at once than ``--concurrency`` (a ``--local-llm`` server: its slots), shows progress on
stderr, and prints every URL masked. This module parses, prints and writes; the measuring is the
library's. One concept, the command, left whole though a little past 450 lines: its parser,
what it talks to, and how each mode's figures are printed and written.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from corrective_rag.errors import ConfigError

__all__ = [
    "add_judge_check_parser",
    "judge_flags",
    "render_check",
    "render_comparison",
    "render_training",
    "run_judge_check",
]

# The judges compared by default, in the order shown (= evaluate.kinds.JUDGE_KINDS but those
# not available in this version; not imported: startup time).
JUDGES = ("verbal", "logprob", "pointwise", "offline")
OFFLINE_JUDGES = ("offline", "learned")  # kinds that call no model: the default without an LLM
_OFFLINE = frozenset(OFFLINE_JUDGES)


def add_judge_check_parser(sub: Any, leaf: Any, seconds: Any, non_negative: Any) -> None:
    """The ``judge-check`` subcommand on ``sub`` (``leaf`` makes a subcommand's parser)."""
    p = leaf(sub, "judge-check", help="grade pairs with known answers: which judge can judge?")
    p.add_argument(
        "--llm-url",
        metavar="URL",
        help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL); key: $OPENAI_API_KEY",
    )
    p.add_argument("--model", metavar="NAME", help="model name sent to it")
    p.add_argument("--local-llm", metavar="GGUF", help="start an embedded llama.cpp server")
    p.add_argument(
        "--timeout",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="most seconds one LLM call may take, silence included (default 60; 300 with "
        "--local-llm)",
    )
    p.add_argument("--max-retries", type=non_negative, default=None, metavar="N")
    p.add_argument(
        "--deadline",
        type=seconds,
        default=300.0,  # = evaluate.check.plain.CHECK_SECONDS (not imported: startup time)
        metavar="SECONDS",
        help="most seconds the whole check may take, in every mode (default: 300)",
    )
    p.add_argument(
        "--concurrency",
        type=lambda text: max(1, non_negative(text)),
        default=None,
        metavar="N",
        help="requests at once (default 4; a --local-llm server's slots)",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument(
        "--pairs",
        metavar="FILE",
        help="labelled pairs (JSON lines: question, text, relevant; id and title optional): "
        "compare every judge on them",
    )
    p.add_argument(
        "--compare", action="store_true", help="compare every judge on the built-in pairs"
    )
    p.add_argument(
        "--judges",
        default=None,
        metavar="LIST",
        help=f"judges to compare, comma-separated, of {', '.join(JUDGE_CHOICES)} (default: "
        f"{','.join(JUDGES)} with an LLM; {','.join(OFFLINE_JUDGES)} without one, which needs "
        "no --llm-url or --model)",
    )
    p.add_argument(
        "--train",
        action="store_true",
        help="with --pairs: fine-tune the learned judge on half the questions, print its "
        "figures before and after on the other half, and keep it (written beside the profile "
        "file) when it does better",
    )
    p.add_argument(
        "--policy",
        default="general",
        help="the filter policy whose keep decisions are counted (default general)",
    )
    judge_flags(p)
    p.set_defaults(handler="cmd_judge_check")


# the judge kinds a user can name (evaluate.kinds.JUDGE_KINDS; not imported: startup time)
JUDGE_CHOICES = ("verbal", "logprob", "pointwise", "offline", "learned")


def judge_flags(g: Any) -> None:
    """``--calibration FILE`` and ``--judge KIND``: which measured judge a command runs."""
    g.add_argument(
        "--calibration",
        metavar="FILE",
        help="the judge profile judge-check wrote: run the judge it chose for --model (default: "
        "$CORRECTIVE_RAG_CALIBRATION or ~/.config/corrective-rag/judge-calibration.json, "
        "if there)",
    )
    g.add_argument(
        "--judge",
        choices=JUDGE_CHOICES,
        default=None,
        metavar="KIND",
        help=f"run this judge ({', '.join(JUDGE_CHOICES)}): as measured in the profile file if "
        "it holds one for --model, else at its defaults (default: the one judge-check chose, "
        "else verbal with an LLM, offline without)",
    )


@dataclass(frozen=True, slots=True)
class _Model:
    """What the check talks to: a chat model (None for offline judges only) and how to name it."""

    chat: Any
    key: str  # the model a profile is kept under
    shown: str  # the model and its URL, masked
    slots: int


def _has_llm(args: argparse.Namespace) -> bool:
    """An LLM was named: ``--llm-url``, ``--local-llm`` or ``$OPENAI_BASE_URL``."""
    return bool(args.llm_url or args.local_llm or os.environ.get("OPENAI_BASE_URL"))


def _kinds(args: argparse.Namespace) -> list[str]:
    from corrective_rag.evaluate.kinds import JUDGE_KINDS

    if args.judges is None:
        names = list(JUDGES if _has_llm(args) else OFFLINE_JUDGES)
        if getattr(args, "train", False) and "learned" not in names:
            names.append("learned")
        return names
    names = list(dict.fromkeys(n.strip() for n in args.judges.split(",") if n.strip()))
    unknown = sorted(set(names) - set(JUDGE_KINDS))
    if unknown or not names:
        raise ConfigError(f"--judges takes {', '.join(JUDGE_KINDS)}; got {args.judges!r}")
    return names


def _needs_model(args: argparse.Namespace) -> bool:
    if args.pairs or args.compare:
        return not set(_kinds(args)) <= _OFFLINE
    return args.judge not in _OFFLINE


@contextlib.contextmanager
def _model(args: argparse.Namespace) -> Iterator[_Model]:
    """The chat model the check grades with: ``--local-llm``, ``--llm-url``, or none."""
    from corrective_rag.calls.settings import call_settings
    from corrective_rag.cli.wiring import check_reachable, local_model
    from corrective_rag.llm.client import OpenAIChatClient
    from corrective_rag.text.urls import mask_url

    if args.local_llm and args.llm_url:
        raise ConfigError("give either --llm-url or --local-llm, not both")
    # The user's --timeout bounds a call, silence included: a small model that answers after
    # minutes of thinking is not timed out by a shorter read timeout.
    local = bool(args.local_llm) or args.timeout is not None
    timeouts, retries = call_settings(args.timeout, max_retries=args.max_retries, local=local)
    if args.local_llm:
        from pathlib import Path

        from corrective_rag.errors import InputError
        from corrective_rag.llm.local_server import LocalLlamaServer

        if not Path(args.local_llm).is_file():
            raise InputError(f"GGUF model not found: {args.local_llm}")
        with LocalLlamaServer(args.local_llm) as server:
            slots = min(args.concurrency or server.n_parallel, server.n_parallel)
            chat = OpenAIChatClient(
                server.base_url, "local", timeouts=timeouts, retries=retries, max_concurrency=slots
            )
            key = args.model or local_model(args.local_llm)
            yield _Model(chat, key, f"{key} (--local-llm)", slots)
        return
    slots = args.concurrency or 4
    if not _needs_model(args):
        yield _Model(None, args.model or "offline", "offline (no LLM)", slots)
        return
    url = args.llm_url or os.environ.get("OPENAI_BASE_URL") or None
    if url is None:
        raise ConfigError("judge-check needs --llm-url URL (or OPENAI_BASE_URL) or --local-llm")
    if not args.model:
        raise ConfigError("judge-check --llm-url needs --model NAME")
    check_reachable(url)
    chat = OpenAIChatClient(
        url,
        args.model,
        api_key=os.environ.get("OPENAI_API_KEY") or None,
        timeouts=timeouts,
        retries=retries,
        max_concurrency=slots,
    )
    yield _Model(chat, args.model, f"{args.model} at {mask_url(url)}", slots)


def _shown(text: str, url: str | None) -> str:
    """``text`` as it may be printed: every URL masked, every key hidden, controls escaped."""
    from corrective_rag.cli.environment import secrets
    from corrective_rag.text.display import printable
    from corrective_rag.text.secrets import redact
    from corrective_rag.text.urls import mask_url, url_secrets

    hidden = (*secrets(), *(url_secrets(url) if url else ()))
    return printable(redact(mask_url(text), hidden), keep_newlines=True)


def _progress(url: str | None) -> Any:
    def told(name: str, asked: int, questions: int, seconds: float) -> None:
        line = f"judge-check: {name} judge: question {asked} of {questions} ({seconds:.1f} s)"
        sys.stderr.write(_shown(line, url) + "\n")
        sys.stderr.flush()

    return told


def run_judge_check(args: argparse.Namespace) -> int:
    """Check the judge (or compare them all); print the figures; 0, or 1 with the reasons."""
    interrupts = getattr(args, "interrupts", None)
    with contextlib.ExitStack() as stack:
        cancel = stack.enter_context(interrupts.by_event_only()) if interrupts else None
        if getattr(args, "train", False) and not args.pairs:
            raise ConfigError("--train needs --pairs FILE: your own labelled pairs to train on")
        model = stack.enter_context(_model(args))
        check = _compare if args.pairs or args.compare else _plain
        code: int = check(args, model, cancel)
    return code


def _url(args: argparse.Namespace) -> str | None:
    return args.llm_url or os.environ.get("OPENAI_BASE_URL") or None


def _plain(args: argparse.Namespace, model: _Model, cancel: Any) -> int:
    import dataclasses
    import json

    from corrective_rag.cli.environment import calibration_path
    from corrective_rag.evaluate import get_policy
    from corrective_rag.evaluate.check.compare import check_profile
    from corrective_rag.evaluate.profile import JudgeProfile
    from corrective_rag.text.display import json_safe

    path = calibration_path(args.calibration)
    profile = JudgeProfile.read(
        path, model=model.key, kind=args.judge, required=args.calibration is not None
    )
    source = f"profile {path}"
    if profile is None:
        kind = args.judge or ("verbal" if model.chat is not None else "offline")
        profile = JudgeProfile.of(kind, model=model.key, policy=args.policy)
        source = "--judge" if args.judge else "no profile: the default judge"
    result = check_profile(
        profile,
        chat=model.chat,
        policy=get_policy(args.policy),
        max_seconds=args.deadline,
        cancel=cancel,
        max_workers=model.slots,
    )
    url = _url(args)
    if args.json:
        figures = {**dataclasses.asdict(result), "passed": result.passed, "from": source}
        text = json_safe(json.dumps(figures, indent=2, ensure_ascii=False))
        sys.stdout.write(_shown(text, url) + "\n")
    else:
        sys.stdout.write(_shown(render_check(result, model.shown, source), url) + "\n")
    sys.stdout.flush()
    if not result.passed:
        why = _shown("; ".join(result.problems), url).replace("\n", " ")
        sys.stderr.write(f"corrective-rag: judge-check failed: {why}\n")
        return 1
    return 0


def render_check(result: Any, judge: str, source: str = "") -> str:
    """The check's figures as aligned lines, then PASS or FAIL with the reasons."""
    graded = result.judge or "as given"
    lines = [
        f"judge: {judge}",
        f"graded as         {graded}" + (f" ({source})" if source else ""),
        f"policy            {result.policy}",
        f"pairs             {result.pairs}  ({result.expected_relevant_share:.0%} relevant)",
        f"agreement         {result.agreement:.2f}",
        f"kept              {result.relevant_share:.2f}",
        f"near misses kept  {result.near_miss_relevant_share:.2f}",
        f"ungraded          {result.ungraded_share:.2f}",
        f"calls             {result.calls}",
        f"seconds per call  {result.seconds_per_call:.2f}",
        f"seconds in all    {result.seconds:.1f}",
        f"tokens per call   {result.tokens_per_call:.0f}",
    ]
    if result.passed:
        lines.append("PASS: its verdicts agree with the known answers")
    else:
        lines.append("FAIL: do not use this judge:")
        lines += [f"  - {problem}" for problem in result.problems]
    return "\n".join(lines)


def _compare(args: argparse.Namespace, model: _Model, cancel: Any) -> int:
    """Compare every judge on the pairs; print; write the profiles; 1 when none is chosen."""
    import dataclasses
    import json

    from corrective_rag.cli.environment import calibration_path
    from corrective_rag.evaluate import get_policy
    from corrective_rag.evaluate.check.compare import compare_judges
    from corrective_rag.evaluate.check.pairs import CHECK_PAIRS, read_pairs
    from corrective_rag.evaluate.profile import write_profiles
    from corrective_rag.text.display import json_safe

    kinds = _kinds(args)
    pairs = read_pairs(args.pairs) if args.pairs else CHECK_PAIRS
    url = _url(args)
    measure: dict[str, Any] = {
        "model": model.key,
        "chat": model.chat,
        "policy": get_policy(args.policy),
        "max_seconds": args.deadline,
        "cancel": cancel,
        "max_workers": model.slots,
        "source": os.path.basename(args.pairs) if args.pairs else "built-in",
        "progress": _progress(url),
    }
    training = None
    if getattr(args, "train", False):
        from corrective_rag.evaluate.check.train import compare_trained

        training = compare_trained(kinds, pairs, **measure)
        comparison = training.comparison
    else:
        comparison = compare_judges(kinds, pairs, **measure)
    path = calibration_path(args.calibration)
    if args.json:
        figures = {
            **dataclasses.asdict(comparison),
            "advice": comparison.advice,
            "passed": comparison.passed,
            "calibration": path,
        }
        if training is not None:
            figures["training"] = _training_figures(training)
        text = json_safe(json.dumps(figures, indent=2, ensure_ascii=False))
    else:
        text = render_comparison(comparison, model.shown, path)
        if training is not None:
            text += "\n" + render_training(training)
    # printed before anything is written: a folder that cannot be written loses nothing
    sys.stdout.write(_shown(text, url) + "\n")
    sys.stdout.flush()
    profiles = comparison.profiles
    if training is not None and training.kept and training.judge is not None:
        profiles["learned"] = _with_judge_file(path, profiles["learned"], training.judge)
    write_profiles(path, model.key, profiles, comparison.chosen)
    if not comparison.passed:
        why = _shown(comparison.advice, url).replace("\n", " ")
        sys.stderr.write(f"corrective-rag: judge-check failed: {why}\n")
        return 130 if comparison.stopped == "interrupted" else 1
    return 0


def render_comparison(comparison: Any, judge: str, path: str | None) -> str:
    """The judges side by side at one operating point (as a run keeps), then the advice."""

    def num(value: float | None) -> str:
        return "   -" if value is None else f"{value:4.2f}"

    lines = [
        f"judge: {judge}",
        f"pairs: {comparison.fit_pairs} to fit thresholds, {comparison.held_out_pairs} held out; "
        f"every figure is of the documents a run keeps under the {comparison.policy} policy, "
        "on the held-out pairs (F1 in-sample in brackets)",
        "judge       call       threshold  AUC   F1            agree  kept  ungraded  p-read  "
        "s/pair  tok/pair",
    ]
    for f in comparison.judges:
        t = f.profile.threshold
        lines.append(
            f"{f.name:<10}  {f.profile.call_shape:<9}  {'-' if t is None else f'{t:.3f}':>9}  "
            f"{num(f.auc)}  {f.held_out_f1:4.2f} ({f.fit_f1:4.2f})   {f.agreement:4.2f}   "
            f"{f.kept_share:4.2f}  {f.ungraded_share:4.2f}      {f.scored_by_probability:4.2f}  "
            f"{f.seconds_per_pair:6.2f}  {f.tokens_per_pair:8.0f}"
            + ("" if f.refused is None else f"   not chosen: {f.refused}")
        )
    lines.append(
        f"keep all    -          -          -     {comparison.trivial_f1:4.2f}          "
        f"{comparison.trivial_agreement:4.2f}   1.00"
    )
    lines += [f"error: {e}" for e in comparison.errors[:5]]
    if path is not None:
        chosen = comparison.chosen or "none"
        lines.append(f"profiles: {path} (chosen: {chosen})")
    lines.append(("PASS: " if comparison.passed else "FAIL: ") + comparison.advice)
    return "\n".join(lines)


def _with_judge_file(path: str, profile: Any, judge: Any) -> Any:
    """``profile`` naming the trained ``judge``'s file, written beside the profile file."""
    import dataclasses
    import json

    from corrective_rag.evaluate.profile_file import write_judge_file

    text = json.dumps(judge.file_record(), indent=1, allow_nan=False) + "\n"
    written, digest = write_judge_file(path, "learned", text)
    sys.stderr.write(f"judge-check: the trained learned judge: {written}\n")
    return dataclasses.replace(profile, judge_file=written, judge_sha256=digest)


def _training_figures(training: Any) -> dict[str, Any]:
    after = training.after
    return {
        "fit_pairs": training.fit_pairs,
        "fit_questions": training.fit_questions,
        "kept": training.kept,
        "why": training.why,
        "before": {"auc": training.before.auc, "held_out_f1": training.before.held_out_f1},
        "after": None
        if after is None
        else {
            "auc": after.auc,
            "held_out_f1": after.held_out_f1,
            "threshold": after.profile.threshold,
        },
    }


def render_training(training: Any) -> str:
    """One line on the learned judge before and after training on the fit half."""

    def num(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    head = (
        f"trained: the learned judge on {training.fit_pairs} pairs of "
        f"{training.fit_questions} question{'' if training.fit_questions == 1 else 's'} "
        "(the fit half)"
    )
    before, after = training.before, training.after
    if after is None:
        return f"{head}; {training.why}"
    return (
        f"{head}; held out: AUC {num(before.auc)} -> {num(after.auc)}, F1 "
        f"{before.held_out_f1:.2f} -> {after.held_out_f1:.2f} "
        f"(keep all {training.comparison.trivial_f1:.2f}); {training.why}"
    )
