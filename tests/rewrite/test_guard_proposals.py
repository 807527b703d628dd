"""Proposals that are no search query: the question itself, the question plus a word, or a
sentence from a document."""

from __future__ import annotations

from corrective_rag.calls import Retries
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.rewrite.guard import (
    REPEATED,
    check_rewrite,
    is_copied_sentence,
    pads_the_question,
)
from corrective_rag.rewrite.llm import PADDED, LLMRewriter
from corrective_rag.testing import ScriptedLLMServer
from corrective_rag.types import Document, Judged, Proposal, Relevance, RewriteRequest, Verdict

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


def test_the_question_plus_one_word_pads_the_question():
    """The question plus one content word searches what the question does; two new words, or a
    query that leaves a question term out, are new searches."""
    assert pads_the_question(f"{QUESTION} background", QUESTION)
    assert pads_the_question(QUESTION, QUESTION)
    assert not pads_the_question(f"{QUESTION} Animorphs sequel", QUESTION)
    assert not pads_the_question("Hork-Bajir Chronicles sequel", QUESTION)
    assert not pads_the_question("anything at all", "the of and")  # no content term to pad


def test_a_padded_proposal_costs_no_call_and_is_not_searched():
    """The grader's "question plus a hint" is rejected with the reason, and no call is made."""
    with ScriptedLLMServer() as server:
        chat = OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))
        kept = Judged(
            Document("k", DOCUMENT), Verdict("k", True, Relevance.HIGH, 0.9, 0.9, "about it")
        )
        req = RewriteRequest(
            QUESTION, (QUESTION,), (kept,), proposal=Proposal(f"{QUESTION} background")
        )
        rewrite = LLMRewriter(chat).rewrite(req)
        assert 0 == server.request_count
    assert rewrite.query is None
    assert rewrite.rejected == f"proposal: {PADDED}"
    assert rewrite.candidate == f"{QUESTION} background"
