"""``judge-check --pairs / --compare``: every judge side by side, thresholds fitted and kept."""

from __future__ import annotations

import json

import pytest
import structlog

from corrective_rag.cli.environment import calibration_path
from corrective_rag.cli.main import main
from corrective_rag.cli.wiring import fitted_threshold
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.check.compare import split_pairs
from corrective_rag.evaluate.check.fit import (
    auc,
    f1_at,
    fit_threshold,
    read_threshold,
    write_threshold,
)
from corrective_rag.evaluate.check.pairs import CHECK_PAIRS, read_pairs
from corrective_rag.evaluate.pointwise import PointwiseEvaluator
from corrective_rag.llm.client import OpenAIChatClient, Retries
from corrective_rag.testing import ScriptedLLMServer
from corrective_rag.testing.judges import all_relevant_judge, faithful_judge


@pytest.fixture(autouse=True)
def _restore_logging():
    yield
    structlog.reset_defaults()


@pytest.fixture
def calibration(tmp_path, monkeypatch):
    path = tmp_path / "calibration.json"
    monkeypatch.setenv("CORRECTIVE_RAG_CALIBRATION", str(path))
    return path


def _compare(server: ScriptedLLMServer, *more: str) -> list[str]:
    return ["judge-check", "--llm-url", server.base_url, "--model", "scripted", *more]


def _pairs_file(tmp_path) -> str:
    path = tmp_path / "pairs.jsonl"
    rows = [
        {
            "question": p.question,
            "text": p.document.text,
            "relevant": p.relevant,
            "id": p.document.id,
        }
        for p in CHECK_PAIRS
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    return str(path)


def test_compare_prints_every_judge_and_writes_the_fitted_threshold(capsys, calibration, tmp_path):
    """A judge whose probabilities agree with its answers: all four judges side by side, the
    trivial rule, one line of advice, exit 0, and the logprob threshold read back by the CLI."""
    with ScriptedLLMServer(reply=faithful_judge, logprobs="agree") as server:
        assert 0 == main(_compare(server, "--pairs", _pairs_file(tmp_path)))
    out = capsys.readouterr().out
    for name in ("verbal", "logprob", "pointwise", "offline", "all relevant"):
        assert name in out
    assert "PASS: use the" in out
    threshold = read_threshold(calibration, "scripted", "logprob")
    assert threshold is not None and 0.2 < threshold < 0.8
    assert threshold == fitted_threshold("scripted")
    assert 0.5 == fitted_threshold("another-model")


def test_a_judge_no_better_than_all_relevant_exits_1(capsys, calibration):
    """A server calling everything relevant, with no probabilities: exit 1 and the reason."""
    with ScriptedLLMServer(reply=all_relevant_judge) as server:
        assert 1 == main(_compare(server, "--compare", "--judges", "verbal,logprob", "--json"))
    captured = capsys.readouterr()
    figures = json.loads(captured.out)
    assert figures["better_than_trivial"] is False
    assert [0.0, 0.0] == [j["scored_by_probability"] for j in figures["judges"]]
    assert "no judge beats calling everything relevant" in captured.err
    assert not calibration.exists()  # no probabilities: no threshold worth keeping


def test_probability_scores_are_measured_and_the_best_judge_is_named(capsys, calibration):
    """Probabilities that follow the labels: the logprob judge ranks every pair right (AUC 1),
    every verdict is scored by probability, and it is the judge advised."""
    with ScriptedLLMServer(reply=faithful_judge, logprobs="agree") as server:
        assert 0 == main(_compare(server, "--compare", "--judges", "logprob", "--json"))
    figures = json.loads(capsys.readouterr().out)
    (logprob,) = figures["judges"]
    assert 1.0 == logprob["scored_by_probability"]
    assert 1.0 == logprob["auc"]
    assert "logprob" == figures["chosen"]
    assert figures["advice"].startswith("use the logprob judge with threshold")


def test_unknown_judge_and_bad_pairs_file_are_config_errors(tmp_path, capsys):
    """--judges with an unknown name, or a pairs line without a label, exits 2 with the line."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "text": "t"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.jsonl:1"):
        read_pairs(str(bad))
    with ScriptedLLMServer() as server:
        assert 2 == main(_compare(server, "--compare", "--judges", "oracle"))
        assert 2 == main(_compare(server, "--pairs", str(bad)))
    assert "--judges" in capsys.readouterr().err


def test_pairs_file_reads_labels_and_ids(tmp_path):
    """Each line becomes a pair; 1/0 read as labels; ids default to the line number."""
    path = tmp_path / "p.jsonl"
    path.write_text(
        '{"question": "q", "text": "a", "relevant": 1}\n\n'
        '{"question": "q", "text": "b", "relevant": false, "id": "x"}\n',
        encoding="utf-8",
    )
    pairs = read_pairs(str(path))
    assert [("pair-1", True), ("x", False)] == [(p.document.id, p.relevant) for p in pairs]


def test_split_keeps_each_question_on_one_side():
    """The fit and held-out halves share no question, and together hold every pair once."""
    fit, held = split_pairs(CHECK_PAIRS)
    assert sorted(fit + held) == list(range(len(CHECK_PAIRS)))
    assert not {CHECK_PAIRS[i].question for i in fit} & {CHECK_PAIRS[i].question for i in held}


def test_metrics_match_hand_computed_values():
    """AUC, F1 and the F1-best threshold on a small hand-worked example."""
    scores, labels = [0.9, 0.8, 0.4, 0.3, 0.1], [True, False, True, False, False]
    assert 5 / 6 == pytest.approx(auc(scores, labels))
    assert 4 / 5 == pytest.approx(f1_at(scores, labels, 0.35))  # tp 2, fp 1, fn 0
    assert 0.35 == pytest.approx(fit_threshold(scores, labels))
    assert auc([0.5], [True]) is None


def test_calibration_file_keeps_other_entries_and_refuses_junk(tmp_path):
    """Writing one model's threshold keeps the others; a file that is not JSON is refused."""
    path = tmp_path / "c.json"
    write_threshold(path, "a", "logprob", 0.3)
    write_threshold(path, "b", "logprob", 0.6, auc=0.7)
    assert (0.3, 0.6, None) == tuple(read_threshold(path, m) for m in ("a", "b", "c"))
    path.write_text("not json", encoding="utf-8")
    with pytest.raises(ConfigError):
        read_threshold(path, "a")
    assert str(path) == calibration_path(str(path))


def test_pointwise_judge_reads_yes_and_no_and_their_probabilities():
    """The yes/no judge: words decide without logprobs; P(yes) decides with them."""
    question = CHECK_PAIRS[0].question
    docs = [p.document for p in CHECK_PAIRS[:4]]
    labels = [p.relevant for p in CHECK_PAIRS[:4]]
    for mode, source in ((None, "verbal"), ("disagree", "logprob")):
        with ScriptedLLMServer(reply=faithful_judge, logprobs=mode) as server:
            chat = OpenAIChatClient(server.base_url, "s", retries=Retries(max_retries=0))
            verdicts = PointwiseEvaluator(chat).evaluate(question, docs).verdicts
            assert 4 == server.request_count
        assert {source} == {v.score_source for v in verdicts}
        said = [v.relevant for v in verdicts]
        assert (labels if mode is None else [not y for y in labels]) == said
