"""One meaning per field for a verdict decided by a probability, and the default that asks for
token probabilities but does not apply them (issue 46 item 3).

Mutation testing (mutmut on corrective_rag/evaluate/scoring.py with this file): the survivors
left are equivalent, named here so that a later run can tell them from new ones:

- ``_EDGE = 1e-6`` changed to ``1.000001e-06`` (or another tiny value): thresholds are checked
  to lie inside (0, 1) before they arrive, so the clamp never binds on a real threshold.
- ``min(score, 1.0)`` changed to ``min(score, 2.0)`` (or dropped): at ``p = 1`` the score is
  ``HIGH_FROM + (1 - HIGH_FROM) * (1 - t) / (1 - t)``, and ``x / x`` is exactly 1 in floating
  point, so it never exceeds 1.
- ``np.array([threshold], dtype=np.float64)`` with ``dtype=None`` or no dtype: a Python float
  makes a float64 array either way.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from judge_replies import Written, graded_judge

from corrective_rag import LLMEvaluator
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate import get_policy
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.policy import PRESETS, Decision, FilterPolicy, decide
from corrective_rag.evaluate.scoring import (
    asked_logprobs,
    calibrated,
    check_threshold,
    kept_from,
    recorded,
    with_probability,
)
from corrective_rag.llm.client import OpenAIChatClient, Retries
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.runs.records.results import ok_line, read_results
from corrective_rag.runs.reports.html import render_html
from corrective_rag.testing import ListRetriever, ScriptedLLMServer
from corrective_rag.types import Document, Relevance, RunResult, StopReason, Verdict

WRITTEN = Verdict("d", True, Relevance.MEDIUM, 0.6, 0.6, reasoning="why", missing=("x",))


def test_relevant_from_the_threshold_and_confidence_is_the_chance_of_being_right():
    """Relevant iff p >= t; confidence p for a relevant verdict, 1 - p for an irrelevant one;
    the score from HIGH_FROM up over the relevant side, under RELEVANT_FROM on the other."""
    assert (True, pytest.approx(0.7), pytest.approx(0.3)) == calibrated(0.3, 0.3)
    relevant, score, confidence = calibrated(0.29, 0.3)
    assert relevant is False
    assert pytest.approx(0.71) == confidence
    assert pytest.approx(0.5 * 0.29 / 0.3) == score
    assert (True, 1.0, 1.0) == calibrated(1.0, 0.3)
    assert (False, 0.0, 1.0) == calibrated(0.0, 0.3)
    assert pytest.approx(0.7 + 0.3 * 0.5) == calibrated(0.65, 0.3)[1]  # halfway up
    for t in (0.05, 0.3, 0.5, 0.8):
        scores = [calibrated(p / 100, t)[1] for p in range(101)]
        assert scores == sorted(scores)
        assert all(s < 0.5 for s in scores[: math.ceil(t * 100)])
        assert all(s >= 0.7 for s in scores[math.ceil(t * 100) :])


def test_thresholds_at_the_ends_and_the_defaults():
    """A threshold of 0 or 1 is read just inside (0, 1), never divided by; 0.5 by default."""
    assert (True, 1.0, 1.0) == calibrated(1.0, 1.0)
    assert (False, 0.0, 1.0) == calibrated(0.0, 0.0)
    assert calibrated(0.6)[0] is True and calibrated(0.4)[0] is False
    assert with_probability(WRITTEN, 0.6).relevant is True
    assert with_probability(WRITTEN, 0.4).relevant is False
    general, lax = get_policy("general"), FilterPolicy(high_confidence=0.0, medium_confidence=0.0)
    assert pytest.approx(1 - 1e-6, abs=1e-12) == kept_from(1.0, general)
    assert pytest.approx(1e-6, abs=1e-12) == kept_from(0.0, lax)


def test_a_probability_verdict_keeps_its_words_and_records_p():
    """Decided by p: label HIGH or LOW from the score, score_source logprob, probability p;
    reasoning and missing kept. Recorded only: nothing that decides changes."""
    kept = with_probability(WRITTEN, 0.9, 0.4)
    assert (True, Relevance.HIGH, "logprob", 0.9) == (
        kept.relevant,
        kept.label,
        kept.score_source,
        kept.probability,
    )
    assert pytest.approx(0.7 + 0.3 * 0.5 / 0.6) == kept.score
    assert (0.9, "why", ("x",)) == (kept.confidence, kept.reasoning, kept.missing)
    dropped = with_probability(WRITTEN, 0.1, 0.4)
    assert (False, Relevance.LOW, pytest.approx(0.9)) == (
        dropped.relevant,
        dropped.label,
        dropped.confidence,
    )
    noted = recorded(WRITTEN, 0.99)
    assert (True, Relevance.MEDIUM, 0.6, 0.6, "verbal", 0.99) == (
        noted.relevant,
        noted.label,
        noted.score,
        noted.confidence,
        noted.score_source,
        noted.probability,
    )


@pytest.mark.parametrize("p", [float("nan"), float("inf"), -0.1, 1.5, True, None, "0.5"])
def test_a_probability_that_is_no_probability_never_decides(p):
    """NaN, inf, out of 0..1, a bool or not a number: the verdict stays as written."""
    assert WRITTEN == with_probability(WRITTEN, p, 0.5)
    assert WRITTEN == recorded(WRITTEN, p)


def test_an_ungraded_verdict_stays_ungraded():
    """No probability turns an ungraded verdict into a graded one."""
    ungraded = Verdict.ungraded("d", "unreadable")
    assert ungraded == with_probability(ungraded, 0.9, 0.5)
    assert ungraded == recorded(ungraded, 0.9)


def test_the_general_policy_keeps_exactly_from_the_threshold_above_its_confidence_floor():
    """Under ``general`` a probability verdict is kept iff p >= max(t, 0.3): from the threshold
    itself for every t from 0.3 on (what judge-check counts), never a guess below 0.3."""
    general = get_policy("general")
    for t in (0.05, 0.2, 0.3, 0.35, 0.5, 0.62, 0.9):
        assert pytest.approx(max(t, 0.3)) == kept_from(t, general)
        for step in range(1001):
            p = step / 1000
            kept = decide(with_probability(WRITTEN, p, t), general) is Decision.KEEP
            assert (p >= max(t, 0.3)) == kept, (t, p)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_kept_from_is_where_decide_starts_keeping_under_every_preset(name):
    """kept_from agrees with decide() on each side of its cut, for every preset and a custom
    policy whose medium rule is the one that binds."""
    policies = [PRESETS[name], FilterPolicy(high_score=0.95, medium_score=0.75)]
    for policy in policies:
        for t in (0.1, 0.25, 0.4, 0.5, 0.7, 0.85):
            cut = kept_from(t, policy)
            assert cut >= t
            for p in (cut - 1e-6, cut - 0.01, cut + 1e-6, cut + 0.01, 0.0, 1.0):
                if not 0.0 <= p <= 1.0:
                    continue
                kept = decide(with_probability(WRITTEN, p, t), policy) is Decision.KEEP
                assert (p >= cut) == kept, (policy.name, t, p, cut)


def test_kept_from_takes_the_lower_of_the_two_rules():
    """medical: the high rule holds from max(t + (1 - t) / 3, 0.6), the medium one from 0.85."""
    medical = get_policy("medical")
    assert pytest.approx(0.6) == kept_from(0.4, medical)  # 0.6 vs max(0.4 + 0.2, 0.6)
    assert pytest.approx(0.85) == kept_from(0.8, medical)  # 0.8 + 0.0667 = 0.867 > 0.85
    assert pytest.approx(0.7 + 0.1) == kept_from(0.7, medical)  # 0.8 < 0.85
    never = FilterPolicy(high_score=1.0, high_confidence=1.0, medium_confidence=1.0)
    assert 1.0 == kept_from(0.5, never)


def test_stop_rule_sums_keep_their_meaning():
    """Kept probability verdicts' confidences are their p: their sum is the expected number
    of relevant keeps, so three keeps at p 0.7 sum to 2.1 and at 0.5 they do not."""
    for p, enough in ((0.7, True), (0.5, False)):
        verdict = with_probability(WRITTEN, p, 0.4)
        assert pytest.approx(p) == verdict.confidence
        assert enough == (3 * verdict.confidence >= 3 * 0.7 - 1e-9)


def test_logprobs_follows_the_openai_convention():
    """A bool says whether to ask (True: 5 alternatives); an int 0..20 is top_logprobs."""
    assert (5, None, None, 0, 1, 20) == tuple(
        asked_logprobs(v) for v in (True, False, None, 0, 1, 20)
    )
    for wrong in (21, -1, "5", 1.5):
        with pytest.raises(ConfigError, match="logprobs"):
            asked_logprobs(wrong)
    for wrong in (0.0, 1.0, -0.5, float("nan"), True, "0.5"):
        with pytest.raises(ConfigError, match="threshold"):
            check_threshold(wrong)
    check_threshold(0.5)


def chat(server: ScriptedLLMServer) -> OpenAIChatClient:
    return OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))


def test_llm_evaluator_takes_openai_logprobs_values_and_sends_them():
    """logprobs=True asks top_logprobs 5, 0 asks the tokens alone, False asks nothing; the
    default asks (True) but scores verbally; score_by='probability' needs logprobs."""
    docs = [Document("a", "Ganymede is the largest moon of Jupiter.")]
    with ScriptedLLMServer() as srv:
        for value, sent in ((True, 5), (0, 0), (3, 3), (False, None), (None, None)):
            evaluator = LLMEvaluator(chat(srv), logprobs=value, cache=VerdictCache(0))
            assert sent == evaluator.logprobs
            evaluator.evaluate("Which moon is largest?", docs)
            request = srv.requests[-1]
            assert sent == (request.get("top_logprobs") if request.get("logprobs") else None)
        default = LLMEvaluator(chat(srv))
        assert (5, "verbal", 0.5) == (default.logprobs, default.score_by, default.threshold)
        with pytest.raises(ConfigError, match="score_by"):
            LLMEvaluator(chat(srv), logprobs=False, score_by="probability")
        with pytest.raises(ConfigError, match="score_by"):
            LLMEvaluator(chat(srv), score_by="words")


# -- the acceptance case of issue 46: a confident model writing graded verdicts ----------------

QUESTION = "Which moon of Jupiter is the largest?"
GRADED = {
    "high": Written(True, 0.9, 0.9, 0.99),
    "mid1": Written(True, 0.6, 0.6, 0.99),
    "mid2": Written(True, 0.6, 0.6, 0.99),
    "mid3": Written(True, 0.6, 0.6, 0.99),
    "low1": Written(False, 0.1, 0.9, 0.01),
    "low2": Written(False, 0.2, 0.8, 0.01),
}
DOCS = [Document(i, f"Document {i} about the moons of Jupiter and their sizes.") for i in GRADED]


def _run(**evaluator: object) -> tuple[tuple[str, ...], StopReason, int, list[Verdict], RunResult]:
    with ScriptedLLMServer(faults=graded_judge(lambda q, d: GRADED[d])) as srv:
        client = chat(srv)
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(DOCS),
            LLMEvaluator(client, cache=VerdictCache(0), **evaluator),
            LLMRewriter(client),
            top_k=6,
        )
        result = orch.run(QUESTION, max_iterations=3)
    verdicts = [v for rec in result.history for v in rec.verdicts]
    return result.kept_ids, result.stop_reason, result.iterations, verdicts, result


def test_a_confident_model_keeps_and_stops_as_written_without_a_profile(tmp_path):
    """0.99 on every true/false written, graded verdicts (one high, three medium at 0.6/0.6,
    two low): with no profile the run keeps the same documents and stops the same way as with
    token probabilities off; the probabilities are recorded beside the verdicts. Scored by
    probability (what the previous default did) it would keep four and stop at once."""
    off = _run(logprobs=None)
    default = _run()
    assert (("high",), StopReason.NO_PROGRESS, 2) == off[:3]
    assert off[:3] == default[:3]
    assert {None} == {v.probability for v in off[3]}
    assert {"verbal"} == {v.score_source for v in default[3]}
    assert {0.99, 0.01} == {round(v.probability or 0, 2) for v in default[3]}
    by_probability = _run(score_by="probability")
    assert 4 == len(by_probability[0])
    assert (StopReason.ENOUGH_RELEVANT, 1) == by_probability[1:3]
    # the probabilities are there to inspect: in the results line and the HTML report
    line = ok_line("q1", QUESTION, default[4], 1.0)
    (record,) = read_results_lines([line], tmp_path / "a.jsonl")
    assert 0.99 == round(record.result.history[0].verdicts[0].probability, 2)
    page = render_html([record])
    assert "P(true) 0.99, recorded" in page
    assert "P(true) 0.99, decided" in render_html(
        read_results_lines([ok_line("q1", QUESTION, by_probability[4], 1.0)], tmp_path / "b.jsonl")
    )


def read_results_lines(lines: list[dict], path: Path) -> list:
    """Result records as a results file holds them, read back."""
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return list(read_results(path))
