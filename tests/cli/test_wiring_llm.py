"""The command line's LLM wiring: --timeout, --max-retries, and a local server's slots."""

from __future__ import annotations

import pytest

from corrective_rag.cli.main import build_parser
from corrective_rag.cli.wiring import LOCAL_CALL_SECONDS, Options, _components
from corrective_rag.testing import ScriptedLLMServer
from corrective_rag.types import Document

# Eight documents of ~350 tokens: more than one grading call holds in a 2,048-token slot.
DOCS = [Document(f"d{i}", f"Honey bees collect nectar, note {i}. " * 40) for i in range(8)]


def test_local_llm_client_matches_the_server_slots():
    """With an embedded server of one slot, grading 8 documents never has 2 requests in flight,
    and each call gets the local deadline."""
    with ScriptedLLMServer(latency=0.05) as server:
        evaluator, _ = _components(Options(), None, server.base_url, slots=1, context_tokens=2048)
        evaluation = evaluator.evaluate("How do bees make honey?", DOCS)
        assert 1 == server.max_in_flight
        assert server.request_count >= 2  # the slot's context splits the batch
    assert all(v.graded for v in evaluation.verdicts)
    chat = evaluator.chat
    assert (LOCAL_CALL_SECONDS, LOCAL_CALL_SECONDS) == (chat.timeouts.total, chat.timeouts.read)


def test_timeout_and_max_retries_flags_reach_the_client():
    """--timeout bounds each call with its tries; --max-retries sets the retries."""
    args = build_parser().parse_args(
        ["run", "q", "--store", "s", "--timeout", "12.5", "--max-retries", "0"]
    )
    opts = Options(llm_url="http://127.0.0.1:9/v1", model="m", timeout=args.timeout,
                   max_retries=args.max_retries)  # fmt: skip
    evaluator, rewriter = _components(opts, None, opts.llm_url)
    chat = rewriter.chat
    assert (12.5, 12.5, 0) == (
        chat.timeouts.total,
        chat.retries.give_up_after,
        chat.retries.max_retries,
    )
    assert evaluator.chat is chat


@pytest.mark.parametrize(
    "flag", [["--timeout", "0"], ["--timeout", "nan"], ["--max-retries", "-1"]]
)
def test_bad_timeout_or_retries_is_a_usage_error(flag, capsys):
    """A non-positive --timeout or a negative --max-retries is refused by the parser."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "q", "--store", "s", *flag])
    assert "error" in capsys.readouterr().err
