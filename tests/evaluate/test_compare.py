"""The comparison's figures, worked by hand on a small table of verdicts (issue 46 items 2 and 5).

Four questions of three documents; :func:`split_pairs` puts two questions in the fit half and two
in the held-out half, and each document's verdict (its probability, its written fields) is
chosen by its question's half, so that every figure below can be checked by hand. The
evaluators are tables (no model, no server), so this file is what mutmut runs against
``evaluate/check/compare.py`` and ``grading.py``.

Mutation testing (``mutmut run`` with ``only_mutate = corrective_rag/evaluate/check/compare.py``
and this file): equivalent survivors, named so that a later run can tell them from new ones:

- ``_UNGRADED = -1.0`` changed to another value below 0: it only has to rank below every score.
- ``DEGENERATE`` moved a little (0.01 to 0.011): no fitted threshold lies between.
- the wording of the advice and the refusals past the parts asserted.
- in ``_fitted``, ``base.threshold or 0.5`` with another default: only a thresholded kind is
  fitted, and its profile always has a threshold.
- in ``_fitted``, ``read and v is not None`` as ``read or v is not None``: differs only for an
  ungraded verdict carrying a probability, which no grading produces.
- in ``_load_model``, the text embedded: any text loads the model.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from corrective_rag.errors import ConfigError, LLMError
from corrective_rag.evaluate import JudgeProfile, get_policy
from corrective_rag.evaluate.check.compare import (
    applied,
    check_profile,
    compare_judges,
    split_pairs,
)
from corrective_rag.evaluate.check.pairs import CheckPair
from corrective_rag.types import Document, Evaluation, Relevance, Usage, Verdict

GENERAL = get_policy("general")
QUESTIONS = [f"Question {n} about moons?" for n in range(4)]
PAIRS = tuple(
    CheckPair(q, Document(f"{n}-{k}", f"document {k} of question {n}"), k == 0)
    for n, q in enumerate(QUESTIONS)
    for k in range(3)
)
FIT, HELD = split_pairs(PAIRS)
FIT_Q = list(dict.fromkeys(PAIRS[i].question for i in FIT))
HELD_Q = list(dict.fromkeys(PAIRS[i].question for i in HELD))
assert 2 == len(FIT_Q) == len(HELD_Q)


def _by_role(table: dict[tuple[str, int, int], float]) -> dict[str, float]:
    """doc id -> P, from (half, nth question of that half, document) -> P."""
    out = {}
    for (half, nth, k), p in table.items():
        question = (FIT_Q if half == "fit" else HELD_Q)[nth]
        out[f"{QUESTIONS.index(question)}-{k}"] = p
    return out


# The probability judge: fitted at 0.6 (fit half: relevant 0.9 and 0.8, irrelevant at most 0.4),
# held out: keeps 0.7 (relevant) only; 0.5 (relevant) and 0.55 (irrelevant) fall below.
LOGPROB = _by_role(
    {
        ("fit", 0, 0): 0.9, ("fit", 0, 1): 0.4, ("fit", 0, 2): 0.1,
        ("fit", 1, 0): 0.8, ("fit", 1, 1): 0.2, ("fit", 1, 2): 0.1,
        ("held", 0, 0): 0.7, ("held", 0, 1): 0.55, ("held", 0, 2): 0.1,
        ("held", 1, 0): 0.5, ("held", 1, 1): 0.05, ("held", 1, 2): 0.05,
    }
)  # fmt: skip
# The pointwise judge separates both halves: fitted at 0.55 (between 0.3 and 0.8).
POINTWISE = _by_role(
    {
        ("fit", 0, 0): 0.9, ("fit", 0, 1): 0.3, ("fit", 0, 2): 0.1,
        ("fit", 1, 0): 0.8, ("fit", 1, 1): 0.2, ("fit", 1, 2): 0.1,
        ("held", 0, 0): 0.95, ("held", 0, 1): 0.2, ("held", 0, 2): 0.1,
        ("held", 1, 0): 0.85, ("held", 1, 1): 0.05, ("held", 1, 2): 0.05,
    }
)  # fmt: skip


def _written(doc_id: str, p: float | None) -> Verdict:
    """The model's words: relevant, medium 0.6/0.6 for every document (a run keeps none)."""
    return Verdict(doc_id, True, Relevance.MEDIUM, 0.6, 0.6, probability=p)


class Table:
    """An evaluator answering from a table, one call per question (10 + 5 tokens each)."""

    documents_per_call = 10

    def __init__(self, verdict, fail: Sequence[str] = ()) -> None:
        self.verdict = verdict
        self.fail = set(fail)
        self.calls = 0

    def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
        self.calls += 1
        if question in self.fail:
            raise LLMError("boom")
        verdicts = tuple(self.verdict(d.id) for d in documents)
        return Evaluation(verdicts, Usage(llm_calls=1, prompt_tokens=10, completion_tokens=5))


def _tables(**more):
    json_judge = Table(lambda d: _written(d, LOGPROB[d]))
    pointwise = Table(
        lambda d: Verdict(d, True, Relevance.HIGH, 0.7, 0.7, score_source="logprob",
                          probability=POINTWISE[d])
    )  # fmt: skip
    return {"json": json_judge, "pointwise": pointwise, **more}


def _compare(kinds=("verbal", "logprob", "pointwise"), tables=None, **kw):
    tables = tables or _tables()
    return compare_judges(
        list(kinds), PAIRS, model="m", policy=GENERAL, evaluators=tables, source="table", **kw
    )


def _by_name(comparison):
    return {f.name: f for f in comparison.judges}


def test_each_judge_is_measured_at_the_one_operating_point_a_run_applies():
    """The probability judge's figures, worked by hand: threshold 0.6 fitted on the fit half
    (F1 1.0 there), held out it keeps one relevant of two and nothing else (F1 2/3, agreement
    5/6, kept 1/6), AUC 7/8 (0.5 ranks below 0.55 only); 12 pairs, 4 calls of 15 tokens."""
    figures = _by_name(_compare())["logprob"]
    assert pytest.approx(0.6) == figures.profile.threshold
    assert pytest.approx(1.0) == figures.fit_f1
    assert pytest.approx(2 / 3) == figures.held_out_f1
    assert pytest.approx(5 / 6) == figures.agreement
    assert pytest.approx(1 / 6) == figures.kept_share
    assert pytest.approx(7 / 8) == figures.auc
    assert (0.0, 1.0) == (figures.ungraded_share, figures.scored_by_probability)
    assert pytest.approx(4 * 15 / 12) == figures.tokens_per_pair
    assert figures.seconds_per_pair >= 0.0
    assert figures.refused is None


def test_the_written_verdicts_are_measured_by_their_words():
    """The verbal judge reads the same calls: every verdict medium 0.6/0.6, which the general
    policy never keeps: F1 0, refused as no better than keeping everything."""
    comparison = _compare()
    verbal = _by_name(comparison)["verbal"]
    assert (None, 0.0, 0.0) == (verbal.profile.threshold, verbal.held_out_f1, verbal.kept_share)
    assert pytest.approx(0.5) == verbal.auc  # one score for every pair
    assert "no better than keeping every document" in verbal.refused


def test_the_best_judge_that_may_be_chosen_is_chosen_and_declared():
    """pointwise separates the held-out pairs (F1 1.0) at its own fitted 0.55: chosen, with a
    profile that says what it was measured on; keeping everything scores 0.5 there."""
    comparison = _compare()
    assert "pointwise" == comparison.chosen and comparison.passed
    assert (6, 6) == (comparison.fit_pairs, comparison.held_out_pairs)
    assert pytest.approx(0.5) == comparison.trivial_f1
    assert pytest.approx(2 / 6) == comparison.trivial_agreement
    profile = comparison.profiles["pointwise"]
    assert pytest.approx(0.55) == profile.threshold
    assert ("pointwise", "m", "pointwise", "general") == (
        profile.kind,
        profile.model,
        profile.call_shape,
        profile.policy,
    )
    measured = profile.measured
    assert (12, "table", 6, False) == (
        measured.pairs,
        measured.source,
        measured.held_out_pairs,
        measured.partial,
    )
    assert (pytest.approx(1.0), pytest.approx(1.0), pytest.approx(0.5)) == (
        measured.held_out_f1,
        measured.auc,
        measured.trivial_f1,
    )
    assert comparison.advice.startswith(
        "use the pointwise, threshold 0.550 judge: held-out F1 1.00"
    )
    assert comparison.stopped is None and () == comparison.errors


def test_one_grading_per_family():
    """verbal and logprob share the JSON call: the table is asked once per question."""
    tables = _tables()
    _compare(tables=tables)
    assert 4 == tables["json"].calls
    assert 4 == tables["pointwise"].calls


def test_a_judge_worse_than_chance_or_collapsed_or_that_graded_nothing_is_not_chosen():
    """Inverted probabilities (AUC < 0.5), probabilities all near 1 (a threshold at 0.995) and a
    judge whose every verdict is ungraded: each refused with its reason; nothing chosen."""
    inverted = Table(lambda d: _written(d, 1.0 - LOGPROB[d]))
    figures = _by_name(_compare(("logprob",), _tables(json=inverted)))["logprob"]
    assert figures.auc < 0.5 and "worse than chance" in figures.refused
    sure = Table(lambda d: _written(d, 0.999 if d.endswith("-0") else 0.99))
    figures = _by_name(_compare(("logprob",), _tables(json=sure)))["logprob"]
    assert figures.profile.threshold > 0.99 and "collapsed" in figures.refused
    silent = Table(lambda d: Verdict.ungraded(d, "llm error: refused"))
    comparison = _compare(("logprob",), _tables(json=silent))
    (figures,) = comparison.judges
    assert "graded nothing (llm error: refused)" in figures.refused
    assert 1.0 == figures.ungraded_share and 0.5 == figures.profile.threshold
    assert ("json: llm error: refused",) == comparison.errors
    assert comparison.chosen is None and not comparison.passed
    assert "no judge may be chosen" in comparison.advice


def test_a_call_that_raises_leaves_its_pairs_ungraded_and_says_so():
    """One question's call raising: its pairs ungraded, the error listed, the rest measured."""
    failing = Table(lambda d: _written(d, LOGPROB[d]), fail=[HELD_Q[0]])
    comparison = _compare(("logprob",), _tables(json=failing))
    (figures,) = comparison.judges
    assert pytest.approx(3 / 12) == figures.ungraded_share
    assert ("json: LLMError: boom",) == comparison.errors


def test_a_stopped_comparison_keeps_its_figures_partial_and_chooses_nothing():
    """Cancelled after the first question: the figures of what was graded, marked partial,
    stopped "interrupted", nothing chosen."""
    stop = threading.Event()
    comparison = _compare(progress=lambda *told: stop.set(), cancel=stop)
    assert "interrupted" == comparison.stopped
    assert comparison.chosen is None
    assert all(p.measured.partial for p in comparison.profiles.values())
    assert all(f.refused == "its grading was stopped early" for f in comparison.judges)
    assert comparison.advice.startswith("stopped early (interrupted)")


def test_the_deadline_stops_the_comparison_and_says_so():
    """A deadline that has passed before the first question: nothing asked, said."""
    tables = _tables()
    comparison = _compare(tables=tables, max_seconds=1e-9)
    assert 0 == tables["json"].calls
    assert comparison.stopped.startswith("the deadline of 1e-09 s passed")


def test_a_given_split_is_used():
    """split=(fit, held): the figures are on the pairs given (here: reported on all)."""
    every = list(range(len(PAIRS)))
    comparison = _compare(("logprob",), split=(FIT, every))
    assert (6, 12) == (comparison.fit_pairs, comparison.held_out_pairs)


def test_applied_decides_only_where_a_probability_was_read():
    """A thresholded profile decides a verdict carrying a probability; the others stay."""
    profile = JudgeProfile.of("logprob", model="m", threshold=0.8)
    with_p = _written("d", 0.7)
    assert applied(with_p, profile).relevant is False
    without = _written("d", None)
    assert without is applied(without, profile)
    assert with_p is applied(with_p, JudgeProfile.of("verbal", model="m"))
    assert applied(None, profile) is None


def test_nonsense_is_refused():
    """No kinds, no pairs, an unknown kind, no relevant pair held out."""
    with pytest.raises(ConfigError, match="no judges"):
        _compare(())
    with pytest.raises(ConfigError, match="no pairs"):
        compare_judges(["verbal"], (), model="m", policy=GENERAL)
    with pytest.raises(ConfigError, match="unknown judge kind"):
        _compare(("oracle",))
    irrelevant = tuple(CheckPair(p.question, p.document, False) for p in PAIRS)
    with pytest.raises(ConfigError, match="hold no relevant pair"):
        compare_judges(["logprob"], irrelevant, model="m", policy=GENERAL, evaluators=_tables())


def test_check_profile_grades_the_declared_judge_and_names_it():
    """The plain check of a profile: the figures say which judge, call and threshold."""
    from corrective_rag.evaluate.check.pairs import CHECK_PAIRS

    profile = JudgeProfile.of("offline", model="m")
    result = check_profile(profile, pairs=CHECK_PAIRS[:4], max_seconds=None)
    assert "offline" == result.judge
    assert 4 == result.pairs and "general" == result.policy


def test_an_offline_judges_model_loads_before_the_deadline_counts():
    """The offline judge's embedder is first used outside the check's deadline (its start-up
    is local, not a call): after a server's quick errors the deadline cut it short (14 s
    for a 5 s deadline, first question of the offline judge ungraded)."""
    from corrective_rag.calls.scope import deadline
    from corrective_rag.evaluate.check.compare import _load_model
    from corrective_rag.evaluate.local import LocalEvaluator
    from corrective_rag.testing.filter_contract import LetterEmbedder

    first_use: list[float | None] = []

    class Watched(LetterEmbedder):
        def embed(self, texts):
            if not first_use:
                first_use.append(deadline())
            return super().embed(texts)

    judge = LocalEvaluator(Watched())
    compare_judges(
        ["offline"], PAIRS, model="m", policy=GENERAL, max_seconds=60, evaluators={"offline": judge}
    )
    assert [None] == first_use
    _load_model(Table(lambda d: None))  # a judge of its own, without an embedder: nothing to load


def _graded(verdicts):
    from corrective_rag.evaluate.check.grading import Grading

    return Grading(tuple(verdicts), Usage(), 0.0, (), 1, 1)


def _p(n: int, p: float) -> Verdict:
    return Verdict(f"d{n}", True, Relevance.MEDIUM, 0.6, 0.6, probability=p)


LOGPROB_JUDGE = JudgeProfile.of("logprob", model="m")
# the fit half: three pairs at P 0.35 (one relevant), one relevant at 0.85
SCORED = [_p(0, 0.35), _p(1, 0.35), _p(2, 0.35), _p(3, 0.85)]
SCORED_LABELS = [False, False, True, True]


def test_the_fit_counts_what_a_run_keeps_of_verdicts_without_a_probability():
    """Two irrelevant pairs graded without a probability, written high (a run keeps them at any
    threshold): F1 at 0.6 falls to 0.40 and at 0.3 to 0.50, so 0.3 is fitted; ungraded pairs
    (no verdict) are kept by no threshold, and the fit stays where the scored pairs put it
    (0.6: a tie at F1 0.67 goes to the higher). Mutants that ignore these decisions fail."""
    from corrective_rag.evaluate.check.compare import _fitted

    labels = [*SCORED_LABELS, False, False]
    written = [Verdict(f"h{n}", True, Relevance.HIGH, 0.9, 0.9) for n in range(2)]
    assert 0.3 == pytest.approx(
        _fitted(LOGPROB_JUDGE, _graded(SCORED + written), labels, range(6), GENERAL)
    )
    assert 0.6 == pytest.approx(
        _fitted(LOGPROB_JUDGE, _graded([*SCORED, None, None]), labels, range(6), GENERAL)
    )


def test_the_fit_knows_the_policy_keeps_nothing_below_its_floor():
    """Under the general policy a probability verdict is kept from P 0.3 at any threshold: two
    relevant pairs at 0.2 and 0.25 cannot be kept, so the fit does not go down for them (0.15
    would be F1 1.0 were they kept) and stays between 0.25 and 0.6."""
    from corrective_rag.evaluate.check.compare import _fitted

    verdicts = [_p(0, 0.2), _p(1, 0.25), _p(2, 0.1), _p(3, 0.6)]
    fitted = _fitted(LOGPROB_JUDGE, _graded(verdicts), [True, True, False, True], range(4), GENERAL)
    assert 0.425 == pytest.approx(fitted)


def test_grading_reports_progress_and_refuses_a_wrong_count_of_verdicts():
    """Each question asked is heard as (name, asked, questions, seconds); a judge answering
    fewer verdicts than documents (against the contract) leaves that question ungraded with the
    reason, instead of stopping the check with a ValueError."""
    from corrective_rag.evaluate.check.grading import grade_pairs

    heard = []
    short = Table(lambda d: _written(d, 0.5))
    short.evaluate = lambda question, documents: Evaluation(  # one verdict, whatever is sent
        (_written(documents[0].id, 0.5),), Usage()
    )
    grading = grade_pairs(short, PAIRS, name="short", progress=lambda *told: heard.append(told))
    assert [("short", n, 4) for n in range(1, 5)] == [told[:3] for told in heard]
    assert all(told[3] >= 0.0 for told in heard)
    assert set(grading.verdicts) == {None}
    assert 4 == len(grading.errors)
    assert grading.errors[0].startswith("EvaluatorError: 1 verdicts for 3 documents")
