"""``corrective-rag judge-check``: can the model behind ``--llm-url`` judge, before a long batch?

Grades the built-in pairs with known answers (:mod:`corrective_rag.evaluate.check_pairs`),
prints the figures, and exits 1 with the reasons when the judge calls nearly everything relevant
(or nothing), or agrees with the known answers on less than 0.7 of the pairs.
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
        default=300.0,  # = evaluate.check.CHECK_SECONDS (not imported: startup time)
        metavar="SECONDS",
        help="most seconds the whole check may take (default: 300)",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(handler="cmd_judge_check")


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
