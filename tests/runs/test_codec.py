import json

import pytest

from corrective_rag.errors import InputError
from corrective_rag.runs.records.codec import from_dict, to_dict
from corrective_rag.types import (
    Answer,
    CragAction,
    Document,
    IterationRecord,
    KeptDocument,
    LegScore,
    PhaseUsage,
    Relevance,
    Retrieved,
    Rewrite,
    RunResult,
    StopReason,
    Usage,
    Verdict,
)


def _result() -> RunResult:
    verdict = Verdict("d1", True, Relevance.HIGH, 0.9, 0.8, "names the film", missing="the date")
    ungraded = Verdict.ungraded("d2", "unparseable", raw="{")
    usage = PhaseUsage(grading=Usage(1, 100, 20, 0.01, 0.5))
    record = IterationRecord(
        index=1,
        query="q",
        searched=("q",),
        retrieved=(
            Retrieved("d1", 0.03, 1, (LegScore("bm25", 1, 3.5), LegScore("dense", 2, 0.7))),
        ),
        skipped_ids=(),
        verdicts=(verdict, ungraded),
        kept_ids=("d1",),
        dropped_ids=(),
        ungraded_ids=("d2",),
        action=CragAction.CORRECT,
        fallback=None,
        rewrite=Rewrite("q2", "add the date", usage=Usage(1, 5, 5)),
        usage=usage,
        seconds=0.25,
    )
    return RunResult(
        run_id="r1",
        question="q",
        final_query="q2",
        kept=(KeptDocument(Document("d1", "text", {"source": "x", "n": 3}), verdict, 1, 1),),
        stop_reason=StopReason.ENOUGH_RELEVANT,
        stop_detail="1 >= 1",
        history=(record,),
        usage=usage,
        seconds=0.3,
        policy={"name": "general", "min_score": 0.5},
        answer=Answer("It is X [d1].", ("d1",), supported=True),
    )


def test_run_result_round_trips_through_json_exactly():
    """A whole result survives to_dict -> json -> from_dict unchanged."""
    result = _result()
    text = json.dumps(to_dict(result))
    assert result == from_dict(RunResult, json.loads(text))


def test_from_dict_names_the_bad_path():
    """A malformed record fails with an InputError naming the field path."""
    data = to_dict(_result())
    data["history"][0]["action"] = "maybe"
    with pytest.raises(InputError, match=r"history\[0\]\.action"):
        from_dict(RunResult, data)


def test_a_verdict_from_an_older_results_file_with_free_text_missing_still_reads():
    """Older files wrote a verdict's missing as free text or null; both read as a tuple of terms."""
    from corrective_rag.types import Verdict

    data = to_dict(Verdict.ungraded("d", "x"))
    assert ("year", "director") == from_dict(Verdict, {**data, "missing": "year, director"}).missing
    assert () == from_dict(Verdict, {**data, "missing": None}).missing
