"""The benchmarks' shared parts: the one BEIR loader and the one disk-cached embedder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.beir import load_collection
from benchmarks.cache import DiskCachedEmbedder
from corrective_rag.store.loaders import load_documents


def _beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    corpus = [
        {"_id": "d1", "title": "Ganymede", "text": "The largest moon of Jupiter."},
        {"_id": "d2", "title": "Titan", "text": "The largest moon of Saturn."},
        {"_id": "d3", "title": "", "text": ""},
    ]
    (root / "corpus.jsonl").write_text("\n".join(map(json.dumps, corpus)) + "\n")
    queries = [{"_id": "q1", "text": "largest moon?"}, {"_id": "q2", "text": "unjudged?"}]
    (root / "queries.jsonl").write_text("\n".join(map(json.dumps, queries)) + "\n")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\n")
    return root


def test_collection_reads_documents_as_the_package_loader_does(tmp_path):
    """Benchmark documents are the CLI's documents; only queries with a positive qrel remain."""
    folder = _beir(tmp_path / "moons")
    collection = load_collection(str(folder))
    expected = load_documents(folder / "corpus.jsonl", chunk_tokens=None, skip_empty=True)
    assert tuple(expected) == collection.documents
    assert "Ganymede\nThe largest moon of Jupiter." == collection.documents[0].text
    assert {"q1": "largest moon?"} == collection.queries
    assert {"q1": {"d1": 2, "d2": 0}} == collection.qrels
    assert frozenset({"d1"}) == collection.relevant("q1")


def test_disk_cache_answers_a_rerun_without_the_model(tmp_path, embedder):
    """A second embedder over the same file returns the saved vectors and embeds nothing."""
    path = tmp_path / "vectors.npz"
    first = DiskCachedEmbedder(embedder, path)
    vectors = first.embed(["a moon", "a planet", "a moon"])
    assert 2 == first.texts_embedded
    first.save()
    second = DiskCachedEmbedder(embedder, path)
    assert np.array_equal(vectors, second.embed(["a moon", "a planet", "a moon"]))
    assert 0 == second.texts_embedded
    assert (0, embedder.dimension) == second.embed([]).shape


def test_two_benchmarks_saving_one_cache_keep_each_others_vectors(tmp_path, embedder):
    """Two cached embedders loaded before either saved: the file ends with both their texts."""
    path = tmp_path / "vectors.npz"
    DiskCachedEmbedder(embedder, path).embed(["seed"])  # not saved: the file does not exist yet
    first = DiskCachedEmbedder(embedder, path)
    second = DiskCachedEmbedder(embedder, path)
    first.embed(["a moon"])
    second.embed(["a planet"])
    first.save()
    second.save()  # the last writer used to drop "a moon"
    third = DiskCachedEmbedder(embedder, path)
    third.embed(["a moon", "a planet"])
    assert 0 == third.texts_embedded


def test_disk_cache_keeps_span_embeddings_for_a_rerun(tmp_path, embedder):
    """Span results saved by one cached embedder are answered by the next without the model."""
    path = tmp_path / "vectors.npz"
    texts = ["A moon circles a planet. The planet circles a star.", "Stars are hot gas."]
    spans = [[(0, 24), (25, 51)], [(0, 18)]]
    first = DiskCachedEmbedder(embedder, path)
    vectors, pooled = first.embed_spans(texts, spans)
    assert 2 == first.texts_embedded
    first.save()
    second = DiskCachedEmbedder(embedder, path)
    again, pooled_again = second.embed_spans(texts, spans)
    assert 0 == second.texts_embedded
    assert np.array_equal(vectors, again)
    assert [(2, embedder.dimension), (1, embedder.dimension)] == [p.shape for p in pooled_again]
    assert all(np.array_equal(a, b) for a, b in zip(pooled, pooled_again, strict=True))


def test_within_question_auc_orders_pairs_and_counts_ties_half():
    """The signals benchmark's AUC: right pairs over all pairs, ties half, None for one class."""
    from benchmarks.judge_signals import within_auc

    assert 1.0 == within_auc([3, 2, 1], [True, False, False])
    assert 0.0 == within_auc([1, 2, 3], [True, False, False])
    assert 0.5 == within_auc([1, 1], [True, False])
    assert 0.75 == within_auc([4, 3, 2, 1], [True, False, True, False])
    assert within_auc([1, 2], [True, True]) is None


def test_signals_benchmark_measures_a_small_collection(tmp_path, embedder):
    """Every signal gets an AUC on a question whose hits hold a relevant and an irrelevant page."""
    from benchmarks.judge_signals import SIGNALS, measure

    folder = _beir(tmp_path / "beir")
    report = measure(str(folder), 10, DiskCachedEmbedder(embedder, tmp_path / "v.npz"))
    assert 1 == report["questions_counted"]
    assert set(SIGNALS) == set(report["auc"])
    assert all(0.0 <= value <= 1.0 for value in report["auc"].values())


def test_judge_counts_sums_each_question_over_its_last_pool_and_resamples_questions():
    """The last call of a question holds its whole pool; a perfect rule's gap is above zero."""
    from types import SimpleNamespace

    from benchmarks.judge_counts import bootstrap_difference, question_slices, summed_probabilities

    data: Any = SimpleNamespace(
        queries=(
            SimpleNamespace(direct=(1, 2, 3), batches=((1, 2), (3,))),
            SimpleNamespace(direct=(4, 5), batches=((4, 5),)),
        )
    )
    assert [slice(0, 3), slice(3, 5)] == question_slices(data)
    found = [(2, [0.1, 0.2]), (1, [0.5, 0.1, 0.2]), (2, [0.3, 0.3])]
    assert np.allclose([0.8, 0.6], summed_probabilities(found, data))
    truth = np.array([True, False, False, True, False])
    rows = question_slices(data)
    low, high = bootstrap_difference(truth, np.ones(5, dtype=bool), truth, rows)
    assert 0.0 < low <= high
    assert (0.0, 0.0) == bootstrap_difference(truth, truth, truth, rows)


def test_judge_counts_measures_a_small_collection_with_the_shipped_weights(tmp_path, embedder):
    """One collection: every cap and the one-relevant slice get figures, nothing crashes."""
    from benchmarks.calibrate_local import collect, fit_rules
    from benchmarks.judge_counts import CAPS, counts
    from corrective_rag.evaluate.local import DEFAULT_WEIGHTS

    folder = _beir(tmp_path / "beir")
    data = collect(str(folder), DiskCachedEmbedder(embedder, tmp_path / "v.npz"), None, "top10")
    found = counts(DEFAULT_WEIGHTS, fit_rules([data]), data)
    assert 1 == found["questions"]
    assert 1 == found["one_relevant"]["questions"]
    assert {str(c) for c in CAPS} == set(found["capped"])
    assert found["capped"]["1"]["kept_per_question"] <= 1.0
    assert 0.0 <= found["judge_f1"] <= 1.0


def test_loop_benchmark_pairs_each_query_s_two_arms():
    """The loop minus single shot per figure; precision pools kept documents, as the arms do."""
    from benchmarks.loop import Tally, paired

    truth = frozenset({"a", "b"})
    loop, matched = Tally(), Tally()
    for kept_loop, kept_matched in [({"a", "b"}, {"a", "x"}), ({"a"}, {"a"}), ({"y"}, {"b", "z"})]:
        loop.add(kept_loop, truth, 4, 0, 0.0)
        matched.add(kept_matched, truth, 4, 0, 0.0)
    assert {"recall": 0.5, "all_found": 1 / 3, "precision": 0.75} == loop.at(np.arange(3))
    gaps = paired(loop, matched)
    assert 0.0 == gaps["recall"]["difference"]
    assert round(1 / 3, 4) == gaps["all_found"]["difference"]
    assert round(0.75 - 3 / 5, 4) == gaps["precision"]["difference"]
    low, high = gaps["all_found"]["interval_95"]
    assert 0.0 <= low <= high <= 1.0
    assert (0.0, 0.0) == tuple(paired(loop, loop)["recall"]["interval_95"])


def test_a_collection_without_judged_queries_is_one_clear_line(tmp_path):
    """Qrels with no positive grade, or no folder at all: SystemExit naming the folder."""
    from benchmarks.calibrate_local import load_datasets

    folder = _beir(tmp_path / "none")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t0\n")
    with pytest.raises(SystemExit, match="no query has a relevant document"):
        load_datasets([str(folder)], None, "top10")
    with pytest.raises(SystemExit, match="no such file"):
        load_datasets([str(tmp_path / "missing")], None, "top10")
