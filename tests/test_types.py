import pytest

from corrective_rag.errors import InputError
from corrective_rag.types import Document, PhaseUsage, Usage, Verdict


def test_document_rejects_empty_text():
    """Whitespace-only text is refused with the package's own error."""
    with pytest.raises(InputError, match="empty"):
        Document("a", "   ")


def test_document_rejects_non_string_text():
    """Non-string text is refused and the id is named."""
    with pytest.raises(InputError, match="'a'"):
        Document("a", b"bytes")  # type: ignore[arg-type]


def test_document_rejects_nested_metadata():
    """Metadata must be flat scalars (what chromadb can filter on)."""
    with pytest.raises(InputError, match="metadata"):
        Document("a", "text", {"k": [1, 2]})


def test_document_metadata_is_read_only():
    """Documents are values: their metadata cannot be mutated after creation."""
    doc = Document("a", "text", {"k": 1})
    with pytest.raises(TypeError):
        doc.metadata["k"] = 2  # type: ignore[index]


def test_verdict_must_be_fully_graded_or_ungraded():
    """A half-filled verdict is refused; an ungraded one needs a reason."""
    with pytest.raises(InputError):
        Verdict("d", True, None, 0.5, 0.5)
    v = Verdict.ungraded("d", "unparseable reply", raw="{oops")
    assert v.graded is False
    assert v.relevant is None


def test_usage_adds_up_per_phase():
    """PhaseUsage.total sums every phase."""
    one = Usage(llm_calls=1, prompt_tokens=10, completion_tokens=2, cost_usd=0.5)
    total = PhaseUsage(grading=one, rewriting=one).total
    assert Usage(llm_calls=2, prompt_tokens=20, completion_tokens=4, cost_usd=1.0) == total
