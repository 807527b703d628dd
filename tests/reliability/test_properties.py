"""Property tests that the package's own test files do not already hold.

Already covered elsewhere (not repeated): fusion permutations, symmetry and monotonicity
(tests/store/test_fusion.py), decide's monotonicity and crag_action's thresholds
(tests/evaluate/test_policy.py), normalise_verdict on arbitrary objects
(tests/evaluate/test_normalise.py), the RunResult JSON round trip (tests/runs/test_history.py).
Added here: fusion bounds under extreme scores and ids, order invariance of the policy, the JSON
reader on arbitrary text, hostile JSON for result_from_json, and torn-tail repair of results files.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from runs_helpers import make_result

from corrective_rag import RunResult
from corrective_rag.errors import InputError, LLMTimeoutError, VerdictParseError
from corrective_rag.evaluate.normalise import normalise_verdict
from corrective_rag.evaluate.policy import Decision, FilterPolicy, crag_action, decide
from corrective_rag.llm.jsonparse import parse_json_object
from corrective_rag.runs.records.codec import to_dict
from corrective_rag.runs.records.history import result_from_json
from corrective_rag.runs.records.results import error_line, ok_line, read_results, repair_torn_tail
from corrective_rag.store.fusion import (
    ConvexFusion,
    RRFusion,
    convex_combination,
    reciprocal_rank_fusion,
)
from corrective_rag.types import Relevance, Verdict

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Ids as hostile as the store allows: path separators, quotes, tags, unicode.
ids = st.one_of(
    st.sampled_from(["a/b", "../x", '"', "<document>", "é", "0", " a "]),
    st.text(min_size=1, max_size=6),
)
extreme = st.floats(allow_nan=False, allow_infinity=False)  # includes +-1e308 and subnormals
runs = st.lists(st.tuples(ids, extreme), max_size=10)


# -- fusion ------------------------------------------------------------------------------------


@SETTINGS
@given(runs, runs, st.floats(0.0, 1.0))
def test_convex_scores_stay_in_unit_interval_for_any_finite_scores(bm25, dense, alpha):
    """Convex fusion gives finite scores in 0..1 even for scores near the float limits."""
    fused = ConvexFusion(alpha).fuse([bm25, dense])
    assert all(math.isfinite(s) and -1e-12 <= s <= 1 + 1e-12 for _, s in fused)
    assert len({i for i, _ in fused}) == len(fused)


@SETTINGS
@given(st.lists(st.lists(ids, max_size=10), min_size=1, max_size=4), st.integers(0, 1000))
def test_rrf_score_is_bounded_by_first_place_everywhere(rankings, k):
    """No RRF score exceeds what first place in every list would give: sum(w) / (k + 1)."""
    fused = reciprocal_rank_fusion(rankings, k=k)
    bound = len(rankings) / (k + 1)
    assert all(0 < s <= bound + 1e-12 for _, s in fused)
    assert fused == reciprocal_rank_fusion(rankings, k=k)  # deterministic, ties included


@SETTINGS
@given(runs, runs)
def test_fusions_put_a_document_first_in_both_legs_first(bm25, dense):
    """A document ranked first by both legs is ranked first by RRF and by convex fusion."""
    assume(bm25 and dense)
    top = "top-of-both"
    high = max([s for _, s in bm25 + dense] + [0.0])
    bm25 = [(top, high), *[(i, s) for i, s in bm25 if i != top]]
    dense = [(top, high), *[(i, s) for i, s in dense if i != top]]
    assert top == RRFusion().fuse([bm25, dense])[0][0]
    assert top == convex_combination([bm25, dense], [0.5, 0.5])[0][0]


# -- filtering ---------------------------------------------------------------------------------

unit = st.floats(0.0, 1.0)
verdicts = st.builds(
    lambda i, graded, score, conf: (
        Verdict(f"d{i}", score >= 0.5, Relevance.HIGH, score, conf)
        if graded
        else Verdict.ungraded(f"d{i}", "could not grade")
    ),
    st.integers(0, 50),
    st.booleans(),
    unit,
    unit,
)
policies = st.builds(
    lambda hs, ms, hc, mc, ca, ib: FilterPolicy(
        high_score=max(hs, ms),
        medium_score=min(hs, ms),
        high_confidence=hc,
        medium_confidence=mc,
        correct_at=max(ca, ib),
        incorrect_below=min(ca, ib),
    ),
    unit,
    unit,
    unit,
    unit,
    unit,
    unit,
)


@SETTINGS
@given(st.lists(verdicts, max_size=12), policies, st.randoms())
def test_crag_action_ignores_verdict_order(items, policy, rnd):
    """The CRAG action depends on the verdicts, not on the order the evaluator returned them."""
    shuffled = list(items)
    rnd.shuffle(shuffled)
    assert crag_action(items, policy) == crag_action(shuffled, policy)


@SETTINGS
@given(verdicts, policies)
def test_decide_is_total_and_ungraded_only_for_ungraded(verdict, policy):
    """decide never raises, and says UNGRADED exactly for verdicts the evaluator could not give."""
    decision = decide(verdict, policy)
    assert (Decision.UNGRADED == decision) == (not verdict.graded)


@SETTINGS
@given(st.lists(verdicts, min_size=1, max_size=12), policies)
def test_an_ungraded_verdict_never_changes_the_action_of_graded_ones(items, policy):
    """Adding an ungraded verdict to graded ones leaves the CRAG action as it was."""
    graded = [v for v in items if v.graded]
    assume(graded)
    with_ungraded = [*graded, Verdict.ungraded("extra", "timeout")]
    assert crag_action(graded, policy) == crag_action(with_ungraded, policy)


# -- verdict parsing ---------------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=5)


@SETTINGS
@given(st.text(max_size=200), st.booleans())
def test_parse_json_object_returns_a_dict_or_raises_verdict_parse_error(text, strict):
    """On any text the reader returns a dict or raises VerdictParseError keeping the raw text."""
    try:
        assert isinstance(parse_json_object(text, strict=strict), dict)
    except VerdictParseError as exc:
        assert text.strip() == exc.raw.strip()


@SETTINGS
@given(json_objects, st.text(max_size=30).filter(lambda t: "{" not in t and "`" not in t))
def test_any_object_is_read_back_strictly_and_inside_prose_or_fences(obj, prose):
    """A JSON object is read exactly: alone (strict), after prose and inside a code fence."""
    text = json.dumps(obj)
    assert obj == parse_json_object(f"  {text}\n", strict=True)
    assert obj == parse_json_object(f"{prose}{text}{prose}", strict=False)
    assert obj == parse_json_object(f"{prose}\n```json\n{text}\n```\n{prose}", strict=False)


@SETTINGS
@given(json_objects)
def test_strict_success_implies_the_same_lenient_result(obj):
    """Whatever strict parsing accepts, lenient parsing reads identically."""
    text = json.dumps(obj)
    assert parse_json_object(text, strict=True) == parse_json_object(text, strict=False)


@SETTINGS
@given(st.dictionaries(st.sampled_from(["relevant", "score", "confidence", "label"]), json_values))
def test_normalised_verdict_is_in_range_whatever_the_json(item):
    """Any JSON a model sends becomes a verdict with score and confidence in 0..1, an ungraded
    verdict saying why, or an error."""
    try:
        verdict = normalise_verdict("d", item)
    except VerdictParseError:
        return
    if not verdict.graded:
        assert verdict.error
        return
    assert verdict.score is not None and 0.0 <= verdict.score <= 1.0
    assert verdict.confidence is not None and 0.0 <= verdict.confidence <= 1.0


@SETTINGS
@given(json_values)
def test_result_from_json_on_any_json_raises_only_input_error(value):
    """Any JSON value given to result_from_json is a RunResult or an InputError, nothing else."""
    with contextlib.suppress(InputError):
        assert isinstance(result_from_json(json.dumps(value)), RunResult)


RESULT_DICT = to_dict(make_result("which moons?", kept_per_iteration=(1, 2)))


def _paths(value, prefix=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield (*prefix, i)
            yield from _paths(item, (*prefix, i))


FIELD_PATHS = list(_paths(RESULT_DICT))


@SETTINGS
@given(st.sampled_from(FIELD_PATHS), json_values)
def test_result_from_json_with_one_field_replaced_raises_only_input_error(path, value):
    """A valid result with any one field replaced by any JSON loads or raises InputError."""
    data = json.loads(json.dumps(RESULT_DICT))
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with contextlib.suppress(InputError):
        assert isinstance(result_from_json(json.dumps(data)), RunResult)


# -- JSONL resume ------------------------------------------------------------------------------

# Cheap valid lines: error lines (with multi-byte text, so cuts can fall inside a character)
# and one ok line with a full RunResult.
OK_LINE = ok_line("ok-1", "Häagen 東京?", make_result("Häagen 東京?"), 1.5)
lines = st.lists(
    st.builds(
        lambda i, q: error_line(f"q{i}", q, LLMTimeoutError(f"timed out: {q}"), 0.25),
        st.integers(0, 10_000),
        st.text(min_size=1, max_size=20),
    ),
    max_size=6,
)


def _encode(line) -> bytes:
    return (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines, st.booleans(), st.data())
def test_any_prefix_with_a_torn_tail_is_repaired_to_the_complete_lines(
    tmp_path, complete, ok, data
):
    """Whole lines plus any strict prefix of one more line: repair keeps exactly the whole lines."""
    whole = b"".join(_encode(c) for c in complete)
    next_line = _encode(OK_LINE if ok else error_line("next", "trailing é", ValueError("v"), 0.1))
    cut = data.draw(st.integers(0, len(next_line) - 1))
    path = Path(tmp_path) / f"r{len(whole)}-{cut}.jsonl"
    path.write_bytes(whole + next_line[:cut])
    expected = [(c["id"], c["status"]) for c in complete]
    assert expected == [(r.id, r.status) for r in read_results(path)]  # torn tail ignored
    assert cut == repair_torn_tail(path)
    assert whole == path.read_bytes()
    assert expected == [(r.id, r.status) for r in read_results(path)]
    assert 0 == repair_torn_tail(path)  # idempotent
