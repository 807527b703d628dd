"""The local rewriter: pseudo-relevance feedback from kept documents, through the drift guard."""

from __future__ import annotations

import pytest

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.rewrite.local import NOTHING_KEPT, LocalRewriter
from corrective_rag.text import content_terms
from corrective_rag.types import Document, Judged, Relevance, RewriteRequest, Verdict

QUESTION = (
    "What government position was held by the woman who portrayed Corliss Archer "
    "in the film Kiss and Tell?"
)
FIRST_HOP = Document(
    "Kiss and Tell (1945 film)",
    "Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple as "
    "Corliss Archer. In the film, two teenage girls cause their respective parents much concern "
    "when they start to become interested in boys.",
    {"title": "Kiss and Tell (1945 film)"},
)
DISTRACTOR = Document(
    "Meet Corliss Archer",
    "Meet Corliss Archer, a program from radio's Golden Age, ran from January 7, 1943 to "
    "September 30, 1956, on CBS Radio and later on NBC.",
    {"title": "Meet Corliss Archer"},
)


def verdict(doc_id: str, relevant: bool, missing: str | None = None) -> Verdict:
    label = Relevance.HIGH if relevant else Relevance.LOW
    return Verdict(doc_id, relevant, label, 0.9 if relevant else 0.1, 0.8, missing=missing)


def request(*tried: str) -> RewriteRequest:
    return RewriteRequest(
        QUESTION,
        (QUESTION, *tried),
        (
            Judged(FIRST_HOP, verdict(FIRST_HOP.id, True, "government, position")),
            Judged(DISTRACTOR, verdict(DISTRACTOR.id, False)),
        ),
    )


def test_adds_the_bridge_entity_and_keeps_unmatched_terms():
    """The entity the relevant paragraph names beside the question's words joins the query."""
    rewrite = LocalRewriter().rewrite(request())
    assert rewrite.query is not None
    assert rewrite.query.startswith("Shirley Temple")
    assert {"government", "position"} <= content_terms(rewrite.query)
    assert "Shirley Temple" in rewrite.rationale


def test_drops_terms_only_rejected_documents_contain():
    """Vocabulary found only in rejected documents (radio, CBS) is not added."""
    rewrite = LocalRewriter(max_new_terms=5).rewrite(request())
    assert rewrite.query is not None
    assert not {"radio", "cb", "nbc", "golden"} & content_terms(rewrite.query)


def test_never_repeats_a_tried_query():
    """Each rewrite differs from every query tried before it, across several rounds."""
    rewriter = LocalRewriter()
    tried: list[str] = []
    for _ in range(3):
        rewrite = rewriter.rewrite(request(*tried))
        assert rewrite.query is not None
        assert rewrite.query not in [QUESTION, *tried]
        tried.append(rewrite.query)
    assert "Shirley Temple" not in tried[1]


def test_rejects_drift():
    """With nothing new to add and every variant already tried, the guard's reason is returned."""
    echo = Document("echo", "Volcano eruption.", {})
    only_echo = RewriteRequest(
        "volcano eruption",
        ("volcano eruption", "eruption volcano"),
        (Judged(echo, verdict(echo.id, True)),),
    )
    rewrite = LocalRewriter().rewrite(only_echo)
    assert rewrite.query is None
    assert "rewrite repeats a query already tried" == rewrite.rejected
    assert rewrite.candidate is not None


def test_without_relevant_documents_it_proposes_nothing():
    """Nothing kept: no new words to learn, so no rewrite (the loop pages the question's hits).

    A query of the question's own uncovered words searches less than the question does.
    """
    rewrite = LocalRewriter().rewrite(
        RewriteRequest(QUESTION, (QUESTION,), (Judged(DISTRACTOR, verdict(DISTRACTOR.id, False)),))
    )
    assert rewrite.query is None
    assert NOTHING_KEPT == rewrite.rejected
    nothing_judged = LocalRewriter().rewrite(RewriteRequest(QUESTION, (QUESTION,), ()))
    assert nothing_judged.query is None


def test_bad_arguments():
    """Bad constructor arguments raise ConfigError; a non-request raises InputError."""
    with pytest.raises(ConfigError):
        LocalRewriter(max_new_terms=0)
    with pytest.raises(ConfigError):
        LocalRewriter(idf="idf")
    with pytest.raises(InputError):
        LocalRewriter().rewrite(QUESTION)


def test_searches_the_question_names_no_kept_document_is_about():
    """A name the question gives (a comparison's second side) is searched until it is found."""
    question = "Which was founded first, Acme Rocket Works or the Boston Tea Society?"
    kept = Document(
        "Acme Rocket Works",
        "Acme Rocket Works is a rocket maker founded in 1921 in Ohio.",
        {"title": "Acme Rocket Works"},
    )
    rewrite = LocalRewriter().rewrite(
        RewriteRequest(question, (question,), (Judged(kept, verdict(kept.id, True)),))
    )
    assert rewrite.query is not None
    assert "Boston Tea Society" in rewrite.query
    assert "Acme Rocket Works" not in rewrite.query


BAND_QUESTION = "Which band formed first, Zorblax or Foo Fighters, in what timeframe?"
FOO = Document(
    "Foo Fighters",
    "Foo Fighters is an American rock band formed in Seattle in 1994 by Dave Grohl, with "
    "Nate Mendel and Pat Smear.",
    {"title": "Foo Fighters"},
)


def test_searches_an_unfound_one_word_name_alone():
    """A name no judged document mentions is searched without the found band's members."""
    rewrite = LocalRewriter().rewrite(
        RewriteRequest(BAND_QUESTION, (BAND_QUESTION,), (Judged(FOO, verdict(FOO.id, True)),))
    )
    assert rewrite.query is not None
    assert rewrite.query.startswith("Zorblax")
    assert not {"grohl", "mendel", "smear"} & content_terms(rewrite.query)
    assert "no relevant document mentions: Zorblax" in rewrite.rationale


def test_a_rare_word_outside_names_is_not_an_entity_to_search():
    """Once the name is searched, a missing rare plain word does not keep the focus path."""
    rewriter = LocalRewriter()
    first = rewriter.rewrite(
        RewriteRequest(BAND_QUESTION, (BAND_QUESTION,), (Judged(FOO, verdict(FOO.id, True)),))
    )
    zorblax = Document("Zorblax", "Zorblax is a band formed in 2001.", {"title": "Zorblax"})
    second = rewriter.rewrite(
        RewriteRequest(
            BAND_QUESTION,
            (BAND_QUESTION, first.query),
            (Judged(FOO, verdict(FOO.id, True)), Judged(zorblax, verdict(zorblax.id, True))),
        )
    )
    assert second.query is not None
    assert "no relevant document mentions" not in second.rationale


def test_searches_a_two_word_name_no_relevant_document_mentions_alone():
    """A comparison's second person, mentioned only by a rejected page, is searched by name."""
    question = "Who was born first, Aleksandr Ivanovsky or Arthur Lubin?"
    ivanovsky = Document(
        "Aleksandr Ivanovsky",
        "Aleksandr Ivanovsky was a Soviet film director, twice awarded the Stalin Prize.",
        {"title": "Aleksandr Ivanovsky"},
    )
    other = Document("Lubin", "Siegmund Lubin founded a film studio.", {"title": "Lubin Studios"})
    rewrite = LocalRewriter().rewrite(
        RewriteRequest(
            question,
            (question,),
            (
                Judged(ivanovsky, verdict(ivanovsky.id, True)),
                Judged(other, verdict(other.id, False)),
            ),
        )
    )
    assert rewrite.query is not None
    assert rewrite.query.startswith("Arthur Lubin")
    assert not {"stalin", "prize", "soviet"} & content_terms(rewrite.query)


def test_leaves_out_dates_credit_lines_and_paths():
    """Years, dates, a sentence sharing no question word and an untitled id are never proposed."""
    timing = Document(
        "notes/timeit.md#0",
        "Measure the execution time of small code snippets with a repeatable timer. "
        "Pass -n to set how many times the timer runs the snippet code. "
        "Changed in version 3.7 on Oct 18 2007 in release 2.5. "
        "Thanks to Tim Peters, whose Python Cookbook chapter started it.",
    )
    question = "How do I measure the execution time of a small code snippet?"
    judged = (Judged(timing, verdict(timing.id, True)),)
    rewrite = LocalRewriter(max_new_terms=5).rewrite(RewriteRequest(question, (question,), judged))
    assert rewrite.query is not None
    words = content_terms(rewrite.query)
    assert not {"oct", "2007", "3", "7", "2", "5", "n", "tim", "peter", "cookbook"} & words
    assert not {"note", "timeit", "md"} & words


def test_a_long_title_is_not_a_search_phrase():
    """A relevant document's sentence-long title is not pasted into the rewrite."""
    paper = Document(
        "c1",
        "Similarity laws for heated wings are derived. Scale models obey the laws of heating.",
        {"title": "similarity laws for aerothermoelastic testing of heated high speed wings"},
    )
    question = "What similarity laws must be obeyed when constructing heated aircraft models?"
    judged = (Judged(paper, verdict(paper.id, True)),)
    rewrite = LocalRewriter(max_new_terms=5).rewrite(RewriteRequest(question, (question,), judged))
    assert rewrite.query is not None
    assert "aerothermoelastic testing" not in rewrite.query


def test_leaves_out_words_in_a_script_the_question_does_not_use():
    """A name's native spelling beside its English one is not proposed for an English question;
    a question asked in that script still gets its own words."""
    paragraph = Document(
        "p1",
        "Eenasul Fateh (Bengali: ঈনাসুল ফাতেহ), known by his stage name Aladin, is a "
        "management consultant and former magician who helped organisations perform.",
    )
    question = "Who was known by his stage name Aladin and worked as a consultant?"
    judged = (Judged(paragraph, verdict(paragraph.id, True)),)
    # as in a mostly English corpus, the native spelling is its rarest, heaviest term
    rewriter = LocalRewriter(max_new_terms=5, idf=lambda t: 1.0 if t.isascii() else 9.0)
    rewrite = rewriter.rewrite(RewriteRequest(question, (question,), judged))
    assert rewrite.query is not None
    assert not any("\u0980" <= c <= "\u09ff" for c in rewrite.query)
    assert "Eenasul Fateh" in rewrite.query
    bengali = "ঈনাসুল ফাতেহ কে?"
    rewrite = rewriter.rewrite(RewriteRequest(bengali, (bengali,), judged))
    assert rewrite.query is not None


def test_one_capitalised_word_is_a_term_not_a_name():
    """A sentence's first word ("Tool") and a literal ("None") do not outrank topical terms."""
    question = "How do I measure the execution time of a small code snippet?"
    timeit = Document(
        "timeit#0",
        "timeit: Tool for measuring execution time of small code snippets. The timeit module "
        "runs a statement many times and returns None when the timer is disabled.",
        {},
    )
    profile = Document(
        "profile#0", "profile: Deterministic profiling of programs. Returns None.", {}
    )
    rewrite = LocalRewriter().rewrite(
        RewriteRequest(
            question,
            (question,),
            (Judged(timeit, verdict(timeit.id, True)), Judged(profile, verdict(profile.id, False))),
        )
    )
    assert rewrite.query is not None
    assert rewrite.query.startswith("timeit")
    assert "none" not in content_terms(rewrite.query)
