"""The filter suite of :mod:`corrective_rag.testing.filter_contract`, run over both store engines.

Each store holds the suite's documents; ``ids(where=...)`` and ``retrieve(..., where=...)`` must
select exactly what the reference implementation selects, and invalid filters are InputErrors.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from corrective_rag.errors import InputError
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.testing import FilterContract
from corrective_rag.testing.filter_contract import (
    FILTER_DOCUMENTS,
    ISSUE_FILTERS,
    LetterEmbedder,
    expected_ids,
    filter_mismatches,
    reference_matches,
)
from corrective_rag.types import Document


@pytest.fixture(scope="module", params=["chroma", "qdrant"])
def store(request) -> Iterator[HybridStore]:
    """One in-memory store per engine holding the suite's documents."""
    if request.param == "qdrant":
        pytest.importorskip("qdrant_client", reason="needs the qdrant extra")
        made = HybridStore.qdrant(":memory:", embedder=LetterEmbedder())
    else:
        made = HybridStore.in_memory(embedder=LetterEmbedder())
    made.add(FILTER_DOCUMENTS)
    yield made
    made.close()


class TestStoreIds(FilterContract):
    """``HybridStore.ids(where=...)`` on each engine."""

    @pytest.fixture(autouse=True)
    def _hold(self, store: HybridStore) -> None:
        self.store = store

    def select(self, where):
        return self.store.ids(where=where)


class TestStoreRetrieve(FilterContract):
    """``HybridStore.retrieve(..., where=...)`` on each engine: both legs, fused."""

    @pytest.fixture(autouse=True)
    def _hold(self, store: HybridStore) -> None:
        self.store = store

    def select(self, where):
        hits = self.store.retrieve("year", top_k=len(FILTER_DOCUMENTS), where=where)
        return [hit.document.id for hit in hits]


def test_the_issue_filters_read_as_chroma_reads_them(store) -> None:
    """The nine filters of issue 32 and the interrupted-chunk filter select these ids."""
    expected = [
        {"int", "float"},
        {"int", "float"},
        {"bool", "none", "text"},
        {"bool", "none", "text"},
        {"int", "float"},
        {"bool"},
        set(),
        {"int", "float"},
        {"int", "float", "none", "text"},
        {"int", "bool", "none"},
    ]
    assert expected == [set(store.ids(where=w)) for w in ISSUE_FILTERS]
    assert expected == [set(expected_ids(w, FILTER_DOCUMENTS)) for w in ISSUE_FILTERS]


def test_a_fractional_bound_compares_integers_by_value(store) -> None:
    """0.5 is not the integer 0: equality and ranges read a fraction exactly (chroma truncates)."""
    docs = FILTER_DOCUMENTS
    for where in (
        {"n": 0.5},
        {"n": {"$ne": 0.5}},
        {"n": {"$in": [0.5, 1.5]}},
        {"n": {"$nin": [0.5, -2.5]}},
        {"n": {"$lt": 0.5}},
        {"n": {"$lte": -0.5}},
        {"n": {"$gt": -0.5}},
        {"n": {"$gte": 0.5}},
        {"n": {"$gte": 1.2}},
        {"n": {"$lt": -2.5}},
        {"n": {"$gt": -3.5}},
        {"n": {"$lte": 1.2}},
    ):
        assert sorted(expected_ids(where, docs)) == sorted(store.ids(where=where)), where


def test_a_flipped_ne_fails_the_suite() -> None:
    """An implementation whose $ne needs the field (the old Qdrant and bridge) fails the suite."""
    from corrective_rag.testing.filter_contract import reference_matches

    def old_ne(where, metadata):
        ((key, cond),) = where.items()
        if isinstance(cond, dict) and "$ne" in cond:
            return key in metadata and reference_matches(where, metadata)
        return reference_matches(where, metadata)

    def select(where):
        if len(where) != 1 or next(iter(where)).startswith("$"):
            return expected_ids(where, FILTER_DOCUMENTS)
        return [d.id for d in FILTER_DOCUMENTS if old_ne(where, d.metadata)]

    lines = filter_mismatches(select)
    assert any("{'incomplete': {'$ne': True}}" in line for line in lines)
    with pytest.raises(AssertionError, match="filters read unlike the reference"):

        class Flipped(FilterContract):
            def select(self, where):
                return select(where)

        Flipped().test_filters_select_what_the_reference_selects()


def test_the_reference_refuses_what_it_cannot_read() -> None:
    """The oracle itself raises InputError on every invalid filter of the suite."""
    from corrective_rag.testing.filter_contract import INVALID_FILTERS, reference_matches

    for where in INVALID_FILTERS:
        for metadata in ({"year": 2021}, {}):
            with pytest.raises(InputError):
                reference_matches(where, metadata)


def _translators():
    from corrective_rag.integrations.bridge import where_matches
    from corrective_rag.store.chroma_where import to_chroma_where

    found = {"bridge": lambda w: where_matches(w, {"a": 1}), "chroma": to_chroma_where}
    try:
        from corrective_rag.store.qdrant_where import to_qdrant_filter

        pytest.importorskip("qdrant_client")
        found["qdrant"] = to_qdrant_filter
    except pytest.skip.Exception:
        pass
    return found


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ({}, "expected a non-empty mapping"),
        ({"$or": "ab"}, "$or needs a non-empty list"),
        ({"$and": {"a": 1}}, "$and needs a non-empty list"),
        ({"$and": []}, "$and needs a non-empty list"),
        ({"$bogus": 1}, "unknown operator '$bogus'"),
        ({"a": {"$like": 1}}, "unknown operator '$like'"),
        ({"a": [1]}, "[1] is not a str, int, float or bool"),
        ({"a": {"$eq": None}}, "None is not a str, int, float or bool"),
        ({"a": {"$ne": None}}, "None is not a str, int, float or bool"),
        ({"a": {"$gt": None}}, "None is not a str, int, float or bool"),
        ({"a": {"$nin": [None]}}, "None is not a str, int, float or bool"),
        ({"a": {"$in": [None]}}, "None is not a str, int, float or bool"),
        ({"a": {"$gt": 1, "$lt": 2}}, "one operator per field"),
        ({"a": {"$gt": "x"}}, "$gt needs a number"),
        ({"a": {"$lte": True}}, "$lte needs a number"),
        ({"a": {"$in": []}}, "$in needs a non-empty list"),
        ({"a": {"$nin": "ab"}}, "$nin needs a non-empty list"),
        ({"a": float("nan")}, "nan is not a finite number"),
    ],
)
def test_an_invalid_filter_names_itself_and_what_is_wrong(where, reason) -> None:
    """Every translation refuses a bad filter with an InputError naming the filter and the fault."""
    for name, translate in _translators().items():
        with pytest.raises(InputError) as caught:
            translate(where)
        message = str(caught.value)
        assert message.startswith(f"invalid metadata filter {where!r}: "), name
        assert reason in message, name


def test_a_backend_that_fails_is_reported_case_by_case() -> None:
    """Every case a broken backend gets wrong is one line naming the filter and what happened."""
    from corrective_rag.testing.filter_contract import (
        FILTER_CASES,
        INVALID_FILTERS,
        refusal_mismatches,
    )

    def raising(where):
        raise ValueError("engine down")

    lines = filter_mismatches(raising)
    assert len(FILTER_CASES) == len(lines)
    assert f"{FILTER_CASES[-1]!r}: raised ValueError: engine down" == lines[-1]

    accepted = refusal_mismatches(lambda where: ["b", "a"])
    assert len(INVALID_FILTERS) == len(accepted)
    assert f"{INVALID_FILTERS[-1]!r}: accepted, selected ['a', 'b']" == accepted[-1]
    wrong = refusal_mismatches(raising)
    assert f"{INVALID_FILTERS[0]!r}: raised ValueError, not InputError" == wrong[0]
    assert len(INVALID_FILTERS) == len(wrong)
    assert [] == refusal_mismatches(lambda where: reference_matches(where, {}))
    asked: list[object] = []
    refusal_mismatches(lambda where: asked.append(where) or [])
    assert list(INVALID_FILTERS) == asked

    def refuses_the_first(where):
        if where == INVALID_FILTERS[0]:
            raise InputError("refused")
        return []

    assert len(INVALID_FILTERS) - 1 == len(refusal_mismatches(refuses_the_first))


def test_the_suite_fails_a_backend_that_accepts_invalid_filters() -> None:
    """FilterContract's refusal test raises AssertionError listing every accepted filter."""

    class Lenient(FilterContract):
        def select(self, where):
            return []

    with pytest.raises(AssertionError) as caught:
        Lenient().test_invalid_filters_are_refused()
    message = str(caught.value)
    assert message.startswith("invalid filters not refused:\n{}: accepted, selected []\n")

    class Flipped(FilterContract):
        documents = FILTER_DOCUMENTS[:2]

        def select(self, where):
            return ["int"]

    with pytest.raises(AssertionError) as caught:
        Flipped().test_filters_select_what_the_reference_selects()
    first = str(caught.value).split("\n")[:2]
    assert ["filters read unlike the reference:", f"{ISSUE_FILTERS[0]!r}: expected"] == [
        first[0],
        first[1].split(" [")[0],
    ]
    assert "got ['int']" in str(caught.value) and "expected []" in str(caught.value)
    assert "'text'" not in str(caught.value)  # only the subclass's two documents
    assert str(caught.value).split("\n")[2].startswith("{")


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ({}, "not a non-empty mapping"),
        ({"$bogus": 1}, "unknown operator '$bogus'"),
        ({"$or": []}, "$or takes a non-empty list"),
        ({"a": {"$gt": 1, "$lt": 2}}, "one operator per field"),
        ({"a": {"$gt": "x"}}, "$gt takes a number"),
        ({"a": {"$like": 1}}, "unknown operator '$like'"),
        ({"a": [1]}, "[1] is not a str, int, float or bool"),
        ({"a": float("nan")}, "nan is not a finite number"),
        ({"a": {"$in": []}}, "$in/$nin take a non-empty list"),
    ],
)
def test_the_reference_says_what_is_wrong(where, reason) -> None:
    """The oracle's InputError names the fault, so a user sees why a case is invalid."""
    with pytest.raises(InputError, match="invalid metadata filter") as caught:
        reference_matches(where, {})
    assert reason in str(caught.value)


_LARGE_IN_SCRIPT = """
import json
from corrective_rag.errors import StoreError
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.testing.filter_contract import FILTER_DOCUMENTS, LetterEmbedder

store = HybridStore.in_memory(embedder=LetterEmbedder())
store.add(FILTER_DOCUMENTS)
values = [*range(100_000, 109_999), 2021]
out = {
    "ids": sorted(store.ids(where={"year": {"$in": values}})),
    "retrieve": sorted(
        h.document.id for h in store.retrieve("year", where={"n": {"$nin": values}})
    ),
}
for name, where in (
    ("long", {"year": {"$in": [*range(100_000)]}}),
    ("spelled", {"$or": [{"year": v} for v in values]}),
):
    try:
        store.retrieve("year", where=where)
        out[name] = "answered"
    except StoreError as exc:
        out[name] = type(exc).__name__
print(json.dumps(out))
"""


def test_a_ten_thousand_value_in_is_answered_and_the_process_lives() -> None:
    """A 10,000-value $in is answered and longer filters are refused: chroma does not crash."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # a child process: the old translation crashed chromadb's Rust bindings with SIGSEGV
    done = subprocess.run(
        [sys.executable, "-c", _LARGE_IN_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert 0 == done.returncode, done.stderr[-2000:]
    assert {
        "ids": ["float", "int"],
        "retrieve": ["bool", "float", "int", "none", "text"],
        "long": "FilterTooLargeError",
        "spelled": "FilterTooLargeError",
    } == json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("where", "bound"),
    [
        ({"a": {"$in": list(range(10_001))}}, "more than 10000 $in/$nin values"),
        ({"a": {"$in": [0.5] * 5_000}, "b": {"$nin": [1]}}, "more than 10000 $in/$nin values"),
        ({"$or": [{"a": i} for i in range(101)]}, "more than 100 field terms"),
        ({"$and": [{"$or": [{"a": 1}] * 2}] * 51}, "more than 100 field terms"),
    ],
)
def test_a_filter_past_the_bounds_is_refused_up_front(where, bound) -> None:
    """Every engine refuses a filter past the bounds with one error, a StoreError and InputError."""
    from corrective_rag.errors import FilterTooLargeError, StoreError
    from corrective_rag.store.checks import check_filter_size

    with pytest.raises(FilterTooLargeError, match=re.escape(bound)) as caught:
        check_filter_size(where)
    assert isinstance(caught.value, StoreError) and isinstance(caught.value, InputError)
    check_filter_size({"a": {"$in": list(range(10_000))}})


def test_a_deep_filter_is_refused_without_recursion() -> None:
    """A filter nested 10,000 deep is refused by depth, not by a RecursionError."""
    from corrective_rag.errors import FilterTooLargeError
    from corrective_rag.store.checks import check_filter_size

    where: dict = {"a": 1}
    for _ in range(10_000):
        where = {"$and": [where]}
    with pytest.raises(FilterTooLargeError, match="deeper than 16 levels"):
        check_filter_size(where)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            [1, 1.0, True, "1"],
            {
                "$or": [
                    {"a": {"$in": [1]}},
                    {"a": {"$in": [1.0]}},
                    {"a": {"$in": [True]}},
                    {"a": {"$in": ["1"]}},
                ]
            },
        ),
        (["x", "y", "x"], {"a": {"$in": ["x", "y"]}}),
        ([0.5, -2.5], {"$and": [{"a": {"$in": [0.5, -2.5]}}, {"a": {"$nin": [-2, 0]}}]}),
    ],
)
def test_an_in_list_goes_to_chroma_as_one_in_per_type(values, expected) -> None:
    """chroma gets one $in per value type (its own rule), not one equality per value."""
    from corrective_rag.store.chroma_where import to_chroma_where

    assert expected == to_chroma_where({"a": {"$in": values}})


@pytest.mark.parametrize("engine", ["chroma", "qdrant"])
def test_integers_at_2_53_read_alike_and_past_it_are_refused(engine: str) -> None:
    """Issue 48 item 8: chroma, Qdrant and the reference answered 2**53 + 1 differently (a
    64-bit float reads it as 2**53). Metadata and filters past 2**53 are refused up front with
    one InputError; at the edge (2**53, 2**53 - 1, their floats, 2.0**60) every engine reads
    every comparison as the reference does."""
    if engine == "qdrant":
        pytest.importorskip("qdrant_client", reason="needs the qdrant extra")
    edge = 2**53
    values = {"a": edge, "b": edge - 1, "c": -edge, "d": float(edge), "e": 2.0**60, "f": 1.5}
    docs = [Document(k, f"doc {k}", {"n": v}) for k, v in values.items()]
    for bad in (edge + 1, -edge - 1, 2**64):
        with pytest.raises(InputError, match="past 2"):
            Document("x", "text", {"n": bad})
    made = (
        HybridStore.qdrant(":memory:", embedder=LetterEmbedder())
        if engine == "qdrant"
        else HybridStore.in_memory(embedder=LetterEmbedder())
    )
    try:
        made.add(docs)
        operands = [edge, edge - 1, -edge, float(edge), 2.0**60, 1.5]
        ops = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"]
        for op in ops:
            for x in operands:
                where = {"n": {op: [x, 1] if op in ("$in", "$nin") else x}}
                assert sorted(expected_ids(where, docs)) == sorted(made.ids(where=where)), where
        for where in ({"n": edge + 1}, {"n": {"$in": [-edge - 1]}}, {"n": {"$lt": 2**63}}):
            with pytest.raises(InputError, match="past 2"):
                made.ids(where=where)
            with pytest.raises(InputError, match="past 2"):
                reference_matches(where, {})
    finally:
        made.close()
