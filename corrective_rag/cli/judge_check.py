"""``corrective-rag judge-check``: can the model behind ``--llm-url`` judge, before a long batch?

Grades the built-in pairs with known answers (:mod:`corrective_rag.evaluate.check.pairs`),
prints the figures, and exits 1 with the reasons when the judge calls nearly everything relevant
(or nothing), or agrees with the known answers on less than 0.7 of the pairs.

With ``--pairs FILE.jsonl`` (the user's own labelled pairs) or ``--compare`` (the built-in ones)
it compares every judge the user can run side by side
(:mod:`corrective_rag.evaluate.check.compare`):
the verbal JSON verdict, the same call scored by token probabilities, the pointwise yes/no
judge, and the offline judge; fits thresholds on half the questions and reports on the rest;
writes the fitted thresholds to the calibration file (``--calibration``, default
``$CORRECTIVE_RAG_CALIBRATION`` or ``~/.config/corrective-rag/judge-calibration.json``), which
the other commands read back for the same ``--model``; says in one line which judge to use,
and exits 1 when that judge is no better than calling everything relevant.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from corrective_rag.errors import ConfigError

__all__ = ["add_judge_check_parser", "render_check", "run_judge_check"]


def add_judge_check_parser(sub: Any, leaf: Any, seconds: Any, non_negative: Any) -> None:
    """The ``judge-check`` subcommand on ``sub`` (``leaf`` makes a subcommand's parser)."""
    p = leaf(sub, "judge-check", help="grade pairs with known answers: can this model judge?")
    p.add_argument(
        "--llm-url",
        metavar="URL",
        help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL); key: $OPENAI_API_KEY",
    )
    p.add_argument("--model", required=True, metavar="NAME", help="model name sent to it")
    p.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS")
    p.add_argument("--max-retries", type=non_negative, default=None, metavar="N")
    p.add_argument(
        "--deadline",
        type=seconds,
        default=300.0,  # = evaluate.check.plain.CHECK_SECONDS (not imported: startup time)
        metavar="SECONDS",
        help="most seconds the whole check may take (default: 300)",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument(
        "--pairs",
        metavar="FILE",
        help="labelled pairs (JSON lines: question, text, relevant): compare every judge on them",
    )
    p.add_argument(
        "--compare", action="store_true", help="compare every judge on the built-in pairs"
    )
    p.add_argument(
        "--judges",
        default=",".join(JUDGES),
        metavar="LIST",
        help=f"judges to compare, comma-separated, of {', '.join(JUDGES)} (default: all)",
    )
    p.add_argument(
        "--calibration",
        metavar="FILE",
        help="where fitted thresholds are written and read back (default: "
        "$CORRECTIVE_RAG_CALIBRATION or ~/.config/corrective-rag/judge-calibration.json)",
    )
    p.set_defaults(handler="cmd_judge_check")


# The judges a user can run, in the order they are shown: the JSON verdict as written, the same
# call scored by its token probabilities, one yes/no call per document, and the offline judge.
JUDGES = ("verbal", "logprob", "pointwise", "offline")


def run_judge_check(args: argparse.Namespace) -> int:
    """Check the judge; print the figures; 0 when it can judge, 1 (with the reasons) if not."""
    import dataclasses
    import json
    import sys

    from corrective_rag.calls.settings import call_settings
    from corrective_rag.cli.environment import secrets
    from corrective_rag.cli.wiring import check_reachable
    from corrective_rag.evaluate.llm import LLMEvaluator
    from corrective_rag.llm.client import OpenAIChatClient
    from corrective_rag.text.display import json_safe, printable
    from corrective_rag.text.secrets import redact, redact_tree
    from corrective_rag.text.urls import mask_url

    url = args.llm_url or os.environ.get("OPENAI_BASE_URL") or None
    if url is None:
        raise ConfigError("judge-check needs --llm-url URL (or OPENAI_BASE_URL)")
    check_reachable(url)
    timeouts, retries = call_settings(args.timeout, max_retries=args.max_retries)
    chat = OpenAIChatClient(
        url,
        args.model,
        api_key=os.environ.get("OPENAI_API_KEY") or None,
        timeouts=timeouts,
        retries=retries,
    )
    if args.pairs or args.compare:
        return _compare(args, chat, f"{args.model} at {url}")
    result = LLMEvaluator(chat).check(max_seconds=args.deadline)
    keys = secrets()
    if args.json:
        figures = redact_tree({**dataclasses.asdict(result), "passed": result.passed}, keys)
        text = json_safe(json.dumps(figures, indent=2, ensure_ascii=False))
    else:
        text = render_check(result, f"{args.model} at {mask_url(url)}")
        text = printable(redact(text, keys), keep_newlines=True)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    if not result.passed:
        why = printable(redact("; ".join(result.problems), keys))
        sys.stderr.write(f"corrective-rag: judge-check failed: {why}\n")
        return 1
    return 0


def render_check(result: Any, judge: str) -> str:
    """The check's figures as aligned lines, then PASS or FAIL with the reasons."""
    lines = [
        f"judge: {judge}",
        f"pairs             {result.pairs}  ({result.expected_relevant_share:.0%} relevant)",
        f"agreement         {result.agreement:.2f}",
        f"called relevant   {result.relevant_share:.2f}",
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
        lines.append("FAIL: do not use this model as the judge:")
        lines += [f"  - {problem}" for problem in result.problems]
    return "\n".join(lines)


def _compare(args: argparse.Namespace, chat: Any, judge: str) -> int:
    """Compare every judge on the pairs; write the thresholds; 1 when none beats trivial."""
    import dataclasses
    import json
    import sys

    from corrective_rag.cli.environment import secrets
    from corrective_rag.evaluate.cache import VerdictCache
    from corrective_rag.evaluate.check.compare import compare_judges
    from corrective_rag.evaluate.check.fit import write_threshold
    from corrective_rag.evaluate.check.pairs import CHECK_PAIRS, read_pairs
    from corrective_rag.evaluate.llm import LLMEvaluator
    from corrective_rag.evaluate.local import LocalEvaluator
    from corrective_rag.evaluate.pointwise import PointwiseEvaluator
    from corrective_rag.text.display import json_safe, printable
    from corrective_rag.text.secrets import redact, redact_tree

    names = [n.strip() for n in args.judges.split(",") if n.strip()]
    unknown = sorted(set(names) - set(JUDGES))
    if unknown or not names:
        raise ConfigError(f"--judges takes {', '.join(JUDGES)}; got {args.judges!r}")
    pairs = read_pairs(args.pairs) if args.pairs else CHECK_PAIRS
    build: dict[str, Any] = {
        "verbal": lambda: (LLMEvaluator(chat, logprobs=None, cache=VerdictCache(0)), False),
        "logprob": lambda: (
            LLMEvaluator(chat, score_by="probability", cache=VerdictCache(0)),
            True,
        ),
        "pointwise": lambda: (PointwiseEvaluator(chat), True),
        "offline": lambda: (LocalEvaluator(), False),
    }
    comparison = compare_judges({n: build[n]() for n in dict.fromkeys(names)}, pairs)
    from corrective_rag.cli.environment import calibration_path

    path = calibration_path(args.calibration)
    written = []
    for figures in comparison.judges:
        # Only a threshold on probabilities is worth keeping: a server that returned none
        # leaves verbal scores, whose threshold no evaluator reads.
        if figures.thresholded and figures.scored_by_probability > 0:
            written.append(figures.name)
            write_threshold(
                path,
                args.model,
                figures.name,
                figures.threshold,
                auc=figures.auc,
                held_out_f1=figures.fitted_f1,
                pairs=len(pairs),
                chosen=figures.name == comparison.chosen,
            )
    keys = secrets()
    if args.json:
        figures_out = {
            **dataclasses.asdict(comparison),
            "advice": comparison.advice,
            "better_than_trivial": comparison.better_than_trivial,
            "calibration": path if written else None,
        }
        text = json_safe(json.dumps(redact_tree(figures_out, keys), indent=2, ensure_ascii=False))
    else:
        text = printable(
            redact(render_comparison(comparison, judge, path if written else None), keys),
            keep_newlines=True,
        )
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    if not comparison.better_than_trivial:
        why = printable(redact(comparison.advice, keys))
        sys.stderr.write(f"corrective-rag: judge-check failed: {why}\n")
        return 1
    return 0


def render_comparison(comparison: Any, judge: str, path: str | None) -> str:
    """The judges side by side, the trivial rule under them, then the one line of advice."""

    def num(value: float | None) -> str:
        return "   -" if value is None else f"{value:4.2f}"

    lines = [
        f"judge: {judge}",
        f"pairs: {comparison.fit_pairs} to fit thresholds, {comparison.held_out_pairs} held out "
        "(figures on the held-out pairs; F1 in-sample in brackets)",
        "judge       AUC   F1@fit        F1 said  agree  called  ungraded  p-scored  "
        "s/pair  tok/pair",
    ]
    for f in comparison.judges:
        lines.append(
            f"{f.name:<10}  {num(f.auc)}  {f.fitted_f1:4.2f} ({f.fit_f1:4.2f})  {f.f1:4.2f}    "
            f"{f.agreement:4.2f}   {f.relevant_share:4.2f}    {f.ungraded_share:4.2f}      "
            f"{f.scored_by_probability:4.2f}  {f.seconds_per_pair:6.2f}  {f.tokens_per_pair:8.0f}"
            + (f"   threshold {f.threshold:.3f}" if f.thresholded else "")
        )
    lines.append(
        f"all relevant   -     -             {comparison.all_relevant_f1:4.2f}    "
        f"{comparison.all_relevant_agreement:4.2f}   1.00"
    )
    lines += [f"error: {e}" for e in comparison.errors[:5]]
    if path is not None:
        lines.append(f"thresholds written to {path}")
    lines.append(("PASS: " if comparison.better_than_trivial else "FAIL: ") + comparison.advice)
    return "\n".join(lines)
