"""Proposals that are no search query: the question itself, or a sentence from a document."""

from __future__ import annotations

from corrective_rag.rewrite.guard import REPEATED, check_rewrite, is_copied_sentence

QUESTION = "Which companion book followed The Hork-Bajir Chronicles?"
DOCUMENT = (
    "Animorphs is a series of books. The Hork-Bajir Chronicles is the second companion book to "
    "the Animorphs series, written by K. A. Applegate."
)


def test_the_question_proposed_verbatim_counts_as_a_repeat():
    """A proposal equal to the question up to case, spacing and punctuation is a repeat."""
    assert REPEATED == check_rewrite(f"  {QUESTION.lower()[:-1]} ", QUESTION, [])


def test_a_sentence_copied_from_a_document_is_detected():
    """A statement lifted from a document is copied; keywords and short names are not."""
    copied = "The Hork-Bajir Chronicles is the second companion book to the Animorphs series"
    assert is_copied_sentence(copied, ["unrelated text", DOCUMENT])
    assert not is_copied_sentence("Hork-Bajir Chronicles companion book sequel", [DOCUMENT])
    assert not is_copied_sentence("The Hork-Bajir Chronicles", [DOCUMENT])
    assert not is_copied_sentence(copied, ["unrelated text"])
