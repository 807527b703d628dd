"""The learned judge keeps the evaluator contract, decides by its fitted probability, says what
it measured, reads a bounded part of each document, and reads its judge file strictly."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from learned_pairs import Counting

from corrective_rag import LearnedEvaluator
from corrective_rag.errors import ConfigError, InputError
from corrective_rag.evaluate.learned import (
    LEARNED_FEATURES,
    MAX_DOCUMENT_CHARS,
    LearnedJudge,
    batch_features,
    model_text,
    read_learned_judge,
)
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.testing.evaluator_contract import PROBES, check_evaluator
from corrective_rag.types import HIGH_FROM, RELEVANT_FROM, Document

JUPITER = PROBES[0]


@pytest.fixture
def judge(embedder: SentenceTransformerEmbedder) -> LearnedEvaluator:
    return LearnedEvaluator(embedder)


def _judge_file(folder: Path, **changes: object) -> Path:
    """A judge file that weighs the cosine alone (a known, sensible judge), with ``changes``."""
    raw: dict[str, object] = {
        "format": 1,
        "features": list(LEARNED_FEATURES),
        "mean": [0.0] * 5,
        "scale": [1.0] * 5,
        "weights": [10.0, 0.0, 0.0, 0.0, 0.0],
        "bias": -4.0,
        "threshold": 0.5,
    }
    raw.update(changes)
    path = folder / "judge.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def test_the_learned_evaluator_passes_the_contract(judge):
    """LearnedEvaluator keeps the evaluator contract (corrective_rag.testing's suite)."""
    check_evaluator(judge)


def test_the_shipped_judge_records_its_data_and_out_of_sample_figures():
    """The shipped file names its data with licences and hashes, its commit and LOCO folds."""
    record = read_learned_judge().record
    assert "logistic" == record["kind"]
    assert record["commit"] and record["command"].startswith("python scripts/train_judge.py")
    for source in record["data"]:
        assert source["license"] and source["files"]
    folds = record["leave_one_collection_out"]["folds"]
    assert {s["folder"] for s in record["data"]} == set(folds)
    for fold in folds.values():
        assert {"learned", "local", "all_relevant", "fused_rank", "in_sample", "pool"} <= set(fold)


def test_decisions_follow_the_threshold_and_confidence_is_the_chance_of_being_right(embedder):
    """relevant iff p >= threshold; confidence p or 1 - p; score on the verdict scale's bands."""
    for threshold in (0.05, 0.5, 0.95):
        judge = LearnedEvaluator(embedder, threshold=threshold)
        probabilities = judge.probabilities(JUPITER.question, JUPITER.documents)
        verdicts = judge.evaluate(JUPITER.question, JUPITER.documents).verdicts
        for verdict, p in zip(verdicts, probabilities, strict=True):
            assert (p >= threshold) is verdict.relevant
            assert round(p, 4) == verdict.probability
            assert pytest.approx(p if verdict.relevant else 1 - p, abs=1e-4) == verdict.confidence
            if verdict.relevant:
                assert verdict.score >= HIGH_FROM
            else:
                assert verdict.score < RELEVANT_FROM


def test_the_default_threshold_is_the_files_fitted_one(judge):
    """With no threshold given, the judge decides at the one fitted with the shipped judge."""
    assert read_learned_judge().threshold == judge.threshold


def test_the_judge_decides_by_its_file(embedder, tmp_path):
    """A file that weighs the cosine alone ranks the answer above the off-topic document."""
    judge = LearnedEvaluator(embedder, model=_judge_file(tmp_path))
    p = dict(
        zip(
            ("ganymede", "titan", "honey"),
            judge.probabilities(JUPITER.question, JUPITER.documents),
            strict=True,
        )
    )
    assert p["ganymede"] > p["honey"]
    flipped = LearnedEvaluator(
        embedder, model=_judge_file(tmp_path, weights=[-10.0, 0, 0, 0, 0], bias=4.0)
    )
    q = flipped.probabilities(JUPITER.question, JUPITER.documents)
    assert q[0] < q[2]


def test_features_by_hand():
    """Gaps from the call's best, log length over 7, in LEARNED_FEATURES order."""
    got = batch_features([0.5, 0.8], [1.0, 0.5], [0, 10])
    expected = [(0.5, -0.3, 1.0, 0.0, 0.0), (0.8, 0.0, 0.5, -0.5, math.log1p(10) / 7)]
    assert [pytest.approx(row) for row in expected] == got
    assert [] == batch_features([], [], [])


def test_the_probability_is_the_logistic_of_the_standardised_features():
    """p = sigmoid(bias + sum(w (x - mean) / scale)), by hand, and stable at extremes."""
    judge = LearnedJudge((1.0,) * 5, (2.0,) * 5, (1.0, 0, 0, 0, -1.0), 0.5, 0.5)
    assert pytest.approx(1 / (1 + math.exp(-(0.5 + 1.0 - 0.5)))) == judge.probability(
        (3.0, 0, 0, 0, 2.0)
    )
    assert 0.0 <= judge.probability((-1e6, 0, 0, 0, 0)) < 1e-9


def test_a_verdict_does_not_depend_on_the_order(judge):
    """The same documents in another order get the same verdicts."""
    docs = list(JUPITER.documents)
    together = judge.evaluate(JUPITER.question, docs).verdicts
    backwards = judge.evaluate(JUPITER.question, docs[::-1]).verdicts[::-1]
    assert together == backwards


def test_a_long_document_is_read_up_to_the_bound(judge):
    """What lies past MAX_DOCUMENT_CHARS changes nothing, and the reasoning says how much."""
    head = "Ganymede is the largest moon of Jupiter. " * 60
    assert len(head) > MAX_DOCUMENT_CHARS
    short = Document("d", head[:MAX_DOCUMENT_CHARS])
    long = Document("d", head + "Honey bees make honey. " * 500)
    (cut,) = judge.evaluate(JUPITER.question, [short]).verdicts
    (whole,) = judge.evaluate(JUPITER.question, [long]).verdicts
    assert cut.score == whole.score
    assert f"first {MAX_DOCUMENT_CHARS} of {len(long.text)} characters" in whole.reasoning


def test_the_reasoning_says_what_it_measured(judge):
    """Probability, threshold, cosine, and the question terms it holds and lacks."""
    verdicts = judge.evaluate(JUPITER.question, JUPITER.documents).verdicts
    honey = verdicts[2].reasoning
    assert "P(relevant)" in honey and f"threshold {judge.threshold:.2f}" in honey
    assert "cosine" in honey and "lacks" in honey
    assert "jupiter" in verdicts[0].reasoning
    assert () == verdicts[2].missing


def test_a_title_in_metadata_is_read_in_front_of_the_text():
    """The title is put in front of the text unless the text already starts with it."""
    assert "Danube\nIt flows." == model_text(Document("a", "It flows.", {"title": "Danube"}))
    assert "Danube\nIt flows." == model_text(
        Document("a", "Danube\nIt flows.", {"title": "Danube"})
    )
    assert "It flows." == model_text(Document("a", "It flows."))


@pytest.mark.parametrize("bad", [0, 1.0, -0.1, True, "0.5", math.nan])
def test_a_threshold_outside_zero_one_is_refused(bad):
    """The threshold must be a number strictly between 0 and 1, checked at construction."""
    with pytest.raises(ConfigError):
        LearnedEvaluator(threshold=bad)


def test_construction_reads_no_file(tmp_path):
    """__init__ is cheap: a judge file that does not exist fails at first use, not before."""
    judge = LearnedEvaluator(model=tmp_path / "nothing.json")
    with pytest.raises(ConfigError, match=r"nothing\.json"):
        judge.evaluate("Which river?", [Document("a", "The Danube.")])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"features": ["dense"]}, "features"),
        ({"threshold": 1.5}, "threshold"),
        ({"bias": "0"}, "bias"),
        ({"weights": [1.0, 2.0]}, "weights"),
        ({"scale": [1.0, 1.0, 0.0, 1.0, 1.0]}, "scale"),
        ({"mean": [1.0, math.inf, 0, 0, 0]}, "mean"),
    ],
)
def test_a_bad_judge_file_is_a_config_error(tmp_path, change, message):
    """A judge file of other features, or with a bad number, is refused by name."""
    with pytest.raises(ConfigError, match=message):
        read_learned_judge(_judge_file(tmp_path, **change))


def test_an_oversized_or_odd_judge_file_is_refused(tmp_path):
    """The file is read bounded: too large, a folder, or not a JSON object is a ConfigError."""
    big = tmp_path / "big.json"
    big.write_text("[" + "0," * 600_000 + "0]", encoding="utf-8")
    for path in (big, tmp_path):
        with pytest.raises(ConfigError):
            read_learned_judge(path)
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ConfigError, match="object"):
        read_learned_judge(listed)


def test_bad_documents_are_an_input_error(judge):
    """A bare document where a sequence of documents belongs is refused."""
    with pytest.raises(InputError):
        judge.evaluate("Which river?", Document("a", "The Danube."))  # type: ignore[arg-type]


def test_a_stores_vectors_give_the_features_of_embedding_again(embedder):
    """Judged with a chromadb store's vectors, the judge embeds only the question and what the
    store holds no vector of as read (a titled, a cut, an unstored document), and measures the
    features and verdicts of embedding every document afresh."""
    counting = Counting(embedder)
    moons = "Ganymede, a moon of Jupiter, is the largest moon in the Solar System. " * 40
    stored = [
        *JUPITER.documents,
        Document("danube", "It flows through Vienna.", {"title": "Danube"}),
        Document("long", moons),  # read up to MAX_DOCUMENT_CHARS: not the stored text
        Document("cut", "Io is the innermost of the four Galilean moons of Jupiter."),
    ]
    judged = [*stored[:-1], Document("cut", "Io is the innermost moon."), Document("new", "Io.")]
    with HybridStore.in_memory(embedder=counting) as store:
        store.add(stored)
        reader = LearnedEvaluator(counting, stored=store.vectors)
        embedder.clear_cache()  # nothing read from the cache: embedded afresh or from the store
        counting.asked.clear()
        features = reader.features(JUPITER.question, judged)
        fresh = [model_text(d) for d in judged[3:]]
        assert [JUPITER.question, *fresh] == counting.asked
        verdicts = reader.evaluate(JUPITER.question, judged).verdicts
    embedder.clear_cache()
    plain = LearnedEvaluator(embedder)
    for got, want in zip(features, plain.features(JUPITER.question, judged), strict=True):
        assert pytest.approx(want, abs=1e-5) == got
    assert plain.evaluate(JUPITER.question, judged).verdicts == verdicts


def test_the_learned_evaluator_with_a_stores_vectors_passes_the_contract(embedder):
    """Reading the probes' vectors from a chromadb store, the judge keeps the contract."""
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add([d for probe in PROBES for d in probe.documents])
        check_evaluator(LearnedEvaluator(embedder, stored=store.vectors))


@pytest.mark.parametrize(
    ("stored", "match"),
    [
        (lambda docs: [], "0 vectors for 1"),
        (lambda docs: [np.ones(3, dtype=np.float32)], "shape"),
    ],
)
def test_stored_vectors_that_do_not_fit_are_a_config_error(embedder, stored, match):
    """A stored-vectors callable answering too few vectors, or of another width, is refused."""
    judge = LearnedEvaluator(embedder, stored=stored)
    with pytest.raises(ConfigError, match=match):
        judge.features("Which river?", [Document("a", "The Danube.")])


def test_stored_must_be_callable():
    """A stored-vectors argument that is not callable is refused at construction."""
    with pytest.raises(ConfigError, match="stored"):
        LearnedEvaluator(stored=[None])  # type: ignore[arg-type]
