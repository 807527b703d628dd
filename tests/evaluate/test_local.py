"""The local evaluator: embeddings plus lexical evidence, no LLM."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.evaluate.links import naming_cosine, title_links
from corrective_rag.evaluate.local import DEFAULT_WEIGHTS, LocalEvaluator, verdict_score
from corrective_rag.evaluate.local_features import LocalFeatures, LocalWeights
from corrective_rag.evaluate.policy import Decision, decide, get_policy
from corrective_rag.text.lexical import (
    bm25_scores,
    complement,
    coverage,
    name_phrases,
    names_phrase,
    phrase_form,
    split_sentences,
    term_weights,
    title_phrase,
)
from corrective_rag.types import HIGH_FROM, RELEVANT_FROM, Document, Relevance

QUESTION = "Which volcano erupted in 1980 in Washington state?"

ON_TOPIC = Document(
    "st-helens",
    "Mount St. Helens is an active stratovolcano in Skamania County, Washington. "
    "The volcano is best known for its major eruption on May 18, 1980, the deadliest "
    "and most economically destructive volcanic event in United States history.",
    {"title": "Mount St. Helens"},
)
OFF_TOPIC = Document(
    "sourdough",
    "Sourdough bread is made by the fermentation of dough using wild lactobacillaceae and "
    "yeast. Lactic acid from fermentation imparts a sour taste and improves keeping qualities.",
    {"title": "Sourdough"},
)
LONG_MIXED = Document(
    "geology-notes",
    "Sedimentary rocks form from deposits of mineral and organic particles. Limestone is "
    "mostly calcium carbonate. Many cliffs show layers laid down over millions of years. "
    "In 1980 the volcano Mount St. Helens in Washington erupted explosively. "
    "Metamorphic rocks form under heat and pressure.",
)


@pytest.fixture(scope="module")
def evaluator(embedder):
    return LocalEvaluator(embedder)


def test_on_topic_scores_above_off_topic(evaluator):
    """A document about the question's subject scores above one about something else."""
    on, off = evaluator.evaluate(QUESTION, [ON_TOPIC, OFF_TOPIC]).verdicts
    assert on.score > off.score
    assert (True, False) == (on.relevant, off.relevant)


def test_verdict_fields_are_in_range_and_zero_llm_calls(evaluator):
    """Every verdict is graded with score and confidence in 0..1, and usage counts no LLM call."""
    evaluation = evaluator.evaluate(QUESTION, [ON_TOPIC, OFF_TOPIC, LONG_MIXED])
    assert 0 == evaluation.usage.llm_calls
    assert ["st-helens", "sourdough", "geology-notes"] == [
        v.document_id for v in evaluation.verdicts
    ]
    for verdict in evaluation.verdicts:
        assert verdict.graded
        assert 0.0 <= verdict.score <= 1.0
        assert 0.0 <= verdict.confidence <= 1.0
        assert (verdict.label is not Relevance.LOW) == verdict.relevant


def test_confidence_grows_with_distance_from_threshold(evaluator):
    """A clearly off-topic document is judged irrelevant with more confidence than a mixed one."""
    off, mixed = evaluator.evaluate(QUESTION, [OFF_TOPIC, LONG_MIXED]).verdicts
    assert off.score < mixed.score
    if not mixed.relevant:
        assert off.confidence > mixed.confidence


def test_score_puts_relevant_verdicts_where_the_scale_says_relevant(evaluator):
    """Relevant verdicts score from HIGH_FROM, rejected ones below RELEVANT_FROM; general keeps
    every relevant one (it does not override the judge's decision)."""
    general = get_policy("general")
    for verdict in evaluator.evaluate(QUESTION, [ON_TOPIC, OFF_TOPIC, LONG_MIXED]).verdicts:
        assert verdict.relevant == (verdict.score >= HIGH_FROM)
        assert verdict.relevant == (verdict.score >= RELEVANT_FROM)
        assert verdict.relevant == (Decision.KEEP is decide(verdict, general))
    threshold = DEFAULT_WEIGHTS.threshold
    assert HIGH_FROM == pytest.approx(verdict_score(threshold, threshold))
    assert verdict_score(0.2, 0.4) < verdict_score(0.3, 0.4) < verdict_score(0.9, 0.4)


def test_best_sentence_rescues_a_long_mixed_document(evaluator):
    """The best-sentence feature is higher than the whole-document cosine for a mixed document."""
    (features,) = evaluator.features(QUESTION, [LONG_MIXED])
    assert features.sentence > features.dense
    assert "Mount St. Helens" in features.best_sentence


def test_reasoning_names_matched_and_uncovered_terms_and_missing_is_empty(evaluator):
    """The reasoning names covered terms, the best sentence and the uncovered terms; missing is
    empty (the offline judge cannot tell what is unanswered)."""
    (verdict,) = evaluator.evaluate(QUESTION, [ON_TOPIC]).verdicts
    for term in ("volcano", "1980", "washington"):
        assert term in verdict.reasoning
    assert "best sentence" in verdict.reasoning
    assert "lacks erupted" in verdict.reasoning
    assert () == verdict.missing


def test_idf_weights_the_coverage(embedder):
    """With an idf that makes one term dominant, covering only that term gives most coverage."""
    weights = {"volcano": 10.0}
    evaluator = LocalEvaluator(embedder, idf=lambda t: weights.get(t, 0.5))
    (features,) = evaluator.features("volcano eruption history", [ON_TOPIC])
    assert features.coverage > 0.9


KISS_QUESTION = (
    "What government position was held by the actress who played Corliss Archer in Kiss and Tell?"
)
FIRST_HOP = Document(
    "kiss",
    "Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple "
    "as Corliss Archer.",
    {"title": "Kiss and Tell (1945 film)"},
)
BRIDGE = Document(
    "temple",
    "Shirley Temple Black was an American actress and diplomat who served as Chief of "
    "Protocol of the United States.",
    {"title": "Shirley Temple"},
)


def test_linked_paragraph_gets_credit_from_the_paragraph_naming_it(embedder):
    """A bridge paragraph beside an on-topic paragraph naming it scores higher with the link."""
    batch = [FIRST_HOP, BRIDGE]
    unlinked = LocalEvaluator(embedder, link_titles=False).evaluate(KISS_QUESTION, batch)
    together = LocalEvaluator(embedder).evaluate(KISS_QUESTION, batch).verdicts[1]
    assert together.score > unlinked.verdicts[1].score
    assert "named in an on-topic document" in together.reasoning


def test_link_reaches_documents_passed_as_judged_before(embedder):
    """The paragraph naming the bridge counts when passed as judged before, and only then."""
    evaluator = LocalEvaluator(embedder)
    (later,) = evaluator.evaluate_in_context(KISS_QUESTION, [BRIDGE], [FIRST_HOP]).verdicts
    (alone,) = evaluator.evaluate(KISS_QUESTION, [BRIDGE]).verdicts
    unlinked = LocalEvaluator(embedder, link_titles=False)
    (plain,) = unlinked.evaluate_in_context(KISS_QUESTION, [BRIDGE], [FIRST_HOP]).verdicts
    assert later.score > plain.score
    assert "named in an on-topic document" in later.reasoning
    assert "named in an on-topic document" not in alone.reasoning


def test_verdicts_do_not_depend_on_earlier_calls(embedder):
    """The same call gives the same verdicts whatever the evaluator judged before it."""
    evaluator = LocalEvaluator(embedder)
    first = evaluator.evaluate(KISS_QUESTION, [BRIDGE])
    evaluator.evaluate(KISS_QUESTION, [FIRST_HOP, ON_TOPIC])
    evaluator.evaluate_in_context(KISS_QUESTION, [OFF_TOPIC], [FIRST_HOP])
    assert first == evaluator.evaluate(KISS_QUESTION, [BRIDGE])


def test_untitled_documents_get_no_link_features(embedder):
    """Documents without titles are judged the same with links on, off or detected."""
    docs = [LONG_MIXED, Document("notes/a.md#0", ON_TOPIC.text)]
    verdicts = {
        setting: LocalEvaluator(embedder, link_titles=setting).evaluate(QUESTION, docs)
        for setting in (None, True, False)
    }
    assert verdicts[None] == verdicts[True] == verdicts[False]


def test_gaps_compare_with_the_documents_judged_for_the_question(embedder):
    """Judged alone a document's gaps are zero; beside a better judged one they are negative."""
    evaluator = LocalEvaluator(embedder)
    (alone,) = evaluator.features(QUESTION, [OFF_TOPIC])
    (after,) = evaluator.features(QUESTION, [OFF_TOPIC], [ON_TOPIC])
    assert (0.0, 0.0, 0.0) == (alone.dense_gap, alone.sentence_gap, alone.coverage_gap)
    assert after.dense_gap < 0 and after.coverage_gap < 0


def test_one_embedding_call_per_evaluate(embedder):
    """evaluate() embeds the question, documents and sentences in a single batched call."""

    class Counting:
        calls = 0

        def embed(self, texts):
            Counting.calls += 1
            return embedder.embed(texts)

    LocalEvaluator(Counting()).evaluate(QUESTION, [ON_TOPIC, OFF_TOPIC, LONG_MIXED])
    assert 1 == Counting.calls


def test_empty_batch_and_bad_input(evaluator):
    """No documents give no verdicts; an empty question or a non-document is refused."""
    assert () == evaluator.evaluate(QUESTION, []).verdicts
    with pytest.raises(InputError):
        evaluator.evaluate("  ", [ON_TOPIC])
    with pytest.raises(InputError):
        evaluator.evaluate(QUESTION, ["not a document"])


def test_constructor_validates():
    """Bad constructor arguments raise ConfigError before any model is loaded."""
    with pytest.raises(ConfigError):
        LocalEvaluator(object())
    with pytest.raises(ConfigError):
        LocalEvaluator(idf=3)
    with pytest.raises(ConfigError):
        LocalEvaluator(weights=LocalWeights(0, 1, 1, 1, 1, threshold=1.5))
    with pytest.raises(ConfigError):
        LocalEvaluator(weights=replace(DEFAULT_WEIGHTS, margin=0.0))
    with pytest.raises(ConfigError):
        LocalEvaluator(weights=replace(DEFAULT_WEIGHTS, cap=0))
    with pytest.raises(ConfigError):
        LocalEvaluator(weights=replace(DEFAULT_WEIGHTS, cap=2.5))
    with pytest.raises(ConfigError):
        LocalEvaluator(max_sentences=0)
    with pytest.raises(ConfigError):
        LocalEvaluator(link_titles="yes")


def test_lexical_helpers():
    """Sentences split at full stops, coverage is idf-weighted, names are capitalised runs."""
    assert ["The first one is here.", "Then Mt. Rainier, in the U.S. Northwest."] == (
        split_sentences("The first one is here. Then Mt. Rainier, in the U.S. Northwest.")
    )
    weights = term_weights(["rare", "common"], {"rare": 3.0, "common": 1.0}.get)
    cov = coverage(weights, ["rare"])
    share = weights["rare"] / (weights["rare"] + weights["common"])
    assert (share, ("rare",), ("common",)) == (cov.share, cov.matched, cov.missing)
    assert 0.65 < share < 0.75  # rare leads, less than BM25's own 3:1
    assert ["Shirley Temple", "Bank of America"] == name_phrases(
        "The film starred Shirley Temple, then at Bank of America."
    )
    # a title line and the first word of the text below it are not one name
    assert ["Code Generation", "Compilers", "Recent"] == name_phrases(
        "Code Generation for Compilers\nRecent work on compilers"
    )


def test_title_links():
    """A document is linked to the batch documents that name its title, qualifier dropped."""
    docs = [
        Document("a", "Starring Shirley Temple.", {"title": "Kiss and Tell (1945 film)"}),
        Document("b", "She appeared in Kiss and Tell.", {"title": "Shirley Temple"}),
        Document("c", "Untitled text."),
    ]
    assert [(1,), (0,), ()] == title_links(docs)


def test_title_links_read_qualifiers_and_ampersands():
    """A comma qualifier is dropped like a parenthesised one, and "&" matches "and"."""
    docs = [
        Document("boston", "Boston is a town in Lincolnshire.", {"title": "Boston, Lincolnshire"}),
        Document("t&t", "A role-playing game.", {"title": "Tunnels &amp; Trolls"}),
        Document("kirton", "Kirton End lies near Boston, in Tunnels and Trolls country."),
        Document("bostonian", "The Bostonian Society keeps records.", {"title": "Records"}),
    ]
    assert [(2,), (2,), (), ()] == title_links(docs)


def test_phrase_helpers():
    """Phrase forms match whole words; titles lose qualifiers; stop-word titles name nothing."""
    assert " tunnels and trolls 1975 " == phrase_form("Tunnels &amp; Trolls' 1975!")
    assert "kiss and tell" == title_phrase("Kiss and Tell (1945 film)")
    assert "boston" == title_phrase("Boston, Lincolnshire")
    assert "" == title_phrase("The (band)")
    assert "" == title_phrase(None)
    assert names_phrase(phrase_form("He left Boston."), "boston")
    assert not names_phrase(phrase_form("The Bostonian"), "boston")
    assert not names_phrase(phrase_form("anything"), "")


def test_complement_counts_what_the_first_document_lacks():
    """The share of the question's weight missing from a first document that a second covers."""
    weights = {"film": 1.0, "archer": 1.0, "born": 2.0, "year": 2.0}
    assert 0.5 == complement(weights, {"film", "archer"}, {"born", "archer"})
    assert 0.0 == complement(weights, {"film", "archer", "born", "year"}, {"born"})
    assert 1.0 == complement(weights, set(), weights)


def test_named_documents_get_credit(embedder):
    """A document whose title the question names has the named feature and says so."""
    question = "Who is older, Annie Morton or Terry Richardson?"
    named = Document("tr", "An American fashion photographer.", {"title": "Terry Richardson"})
    other = Document("kr", "An English footballer.", {"title": "Kenton Richardson"})
    evaluator = LocalEvaluator(embedder)
    with_name, without = evaluator.features(question, [named, other])
    assert (1.0, 0.0) == (with_name.named, without.named)
    (verdict,) = LocalEvaluator(embedder).evaluate(question, [named]).verdicts
    assert "the question names its title" in verdict.reasoning
    plain = LocalEvaluator(embedder, weights=replace(DEFAULT_WEIGHTS, named=0.0))
    assert verdict.score > plain.evaluate(question, [named]).verdicts[0].score


BORN_QUESTION = "In what year was the actress who played Corliss Archer in Kiss and Tell born?"
NAMER = Document(
    "kiss2",
    "Kiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer. "
    "Walter Abel played her father.",
    {"title": "Kiss and Tell (1945 film)"},
)
TEMPLE = Document(
    "temple2",
    "Shirley Temple was born in 1928 in Santa Monica, California, and became an actress.",
    {"title": "Shirley Temple"},
)
ABEL = Document(
    "abel",
    "Walter Abel was an American stage and screen character performer.",
    {"title": "Walter Abel"},
)


def test_bridge_features_prefer_the_paragraph_holding_the_rest_of_the_question(embedder):
    """Two paragraphs named by the same on-topic one: the one covering what it lacks wins."""
    evaluator = LocalEvaluator(embedder)
    temple, abel = evaluator.features(BORN_QUESTION, [TEMPLE, ABEL], [NAMER])
    assert temple.linked > 0 and temple.linked == abel.linked
    assert temple.bridge_complement > abel.bridge_complement
    assert temple.bridge_sentence > 0 and abel.bridge_sentence > 0
    assert temple.bridge_depth > 0 and abel.bridge_depth > 0
    assert DEFAULT_WEIGHTS.score(temple) > DEFAULT_WEIGHTS.score(abel)


def test_bridge_depth_grows_as_the_own_evidence_falls_and_needs_a_link(embedder):
    """A linked document's depth is linked x its direct logit below zero; unlinked ones have 0."""
    evaluator = LocalEvaluator(embedder)
    namer, off_topic = evaluator.features(BORN_QUESTION, [NAMER, OFF_TOPIC])
    assert 0.0 == namer.bridge_depth == off_topic.bridge_depth
    (temple,) = evaluator.features(BORN_QUESTION, [TEMPLE], [NAMER, OFF_TOPIC])
    own = LocalEvaluator(embedder, link_titles=False)
    (direct,) = own.features(BORN_QUESTION, [TEMPLE], [NAMER, OFF_TOPIC])
    p = DEFAULT_WEIGHTS.score(direct)
    expected = temple.linked * max(0.0, -math.log(p / (1.0 - p)))
    assert temple.bridge_depth == pytest.approx(expected)


def test_naming_cosine_reads_the_sentence_that_names_the_title():
    """The cosine of the namer's sentence holding the title, 0.0 when no sentence holds it."""
    namer = LocalFeatures(
        0.5,
        0.6,
        0.5,
        0.0,
        "",
        (),
        (),
        sentences=(("It starred Shirley Temple.", 0.6), ("Walter Abel played her father.", 0.2)),
    )
    assert 0.6 == naming_cosine("shirley temple", namer)
    assert 0.2 == naming_cosine("walter abel", namer)
    assert 0.0 == naming_cosine("janet waldo", namer)


def test_bm25_saturates_term_frequency_and_normalises_length():
    """A term counts with diminishing returns, and the same counts weigh less in a longer text."""
    weights = {"volcano": 2.0}
    once, twice, eight = bm25_scores(
        weights, [{"volcano": 1}, {"volcano": 2}, {"volcano": 8}], [10] * 3
    )
    assert once < twice < eight < 4 * once
    short, long = bm25_scores(weights, [{"volcano": 1}, {"volcano": 1}], [5, 50])
    assert short > long
    assert [0.0] == bm25_scores(weights, [{}], [10])
    with pytest.raises(ConfigError):
        bm25_scores(weights, [{}], [1, 2])


def test_bm25_feature_is_relative_to_the_best_judged_document(evaluator):
    """The bm25 feature is 1.0 for the best lexical match among the judged documents, 0.0 without
    any question term."""
    on, off = evaluator.features(QUESTION, [ON_TOPIC, OFF_TOPIC])
    assert 1.0 == pytest.approx(on.bm25)
    assert 0.0 == off.bm25


def test_the_cut_adapts_to_how_many_documents_look_relevant(evaluator):
    """Three documents each about the question are all kept; beside two off-topic ones, only
    the on-topic one is."""
    eruption = Document(
        "eruption-1980",
        "The 1980 eruption of Mount St. Helens in Washington state was a volcanic event that "
        "killed 57 people; the volcano lost 400 metres of its summit.",
    )
    ash = Document(
        "ash-1980",
        "Ash from the volcano's 1980 eruption fell across eastern Washington state, closing "
        "roads and airports for days after Mount St. Helens erupted.",
    )
    bread = Document(
        "rye", "Rye bread is made with flour from rye grain; it is denser and darker than wheat."
    )
    untitled = replace(ON_TOPIC, metadata={})  # no title: no title links, the cut alone
    verdicts = evaluator.evaluate(QUESTION, [untitled, eruption, ash]).verdicts
    assert [True, True, True] == [v.relevant for v in verdicts]
    verdicts = evaluator.evaluate(QUESTION, [ON_TOPIC, OFF_TOPIC, bread]).verdicts
    assert [True, False, False] == [v.relevant for v in verdicts]


def test_default_embedder_reads_sentences_from_the_document_pass():
    """With embed_spans the dense cosine is the document's and each sentence's is its pooled one."""
    from corrective_rag.evaluate.local import judged_sentence_spans
    from corrective_rag.models.embeddings import SentenceTransformerEmbedder

    exact = SentenceTransformerEmbedder(cache_size=0, span_precision="float32")
    (found,) = LocalEvaluator(exact).direct_features(QUESTION, [LONG_MIXED])
    q, doc = exact.embed([QUESTION, LONG_MIXED.text])
    spans = judged_sentence_spans(LONG_MIXED.text, 20)
    _, (pooled,) = exact.embed_spans([LONG_MIXED.text], [spans])
    assert float(q @ doc) == pytest.approx(found.dense, abs=1e-6)
    assert [LONG_MIXED.text[a:b] for a, b in spans] == [s for s, _ in found.sentences]
    assert (pooled @ q).tolist() == pytest.approx([c for _, c in found.sentences], abs=1e-6)


def test_an_embedder_without_embed_spans_embeds_each_sentence_alone(embedder):
    """A user's embedder with embed() only is judged as before: sentences embedded as texts."""

    class Plain:
        def embed(self, texts):
            return embedder.embed(texts)

    (found,) = LocalEvaluator(Plain()).direct_features(QUESTION, [LONG_MIXED])
    sentences = split_sentences(LONG_MIXED.text)
    vectors = embedder.embed([QUESTION, LONG_MIXED.text, *sentences])
    assert float(vectors[1] @ vectors[0]) == pytest.approx(found.dense, abs=1e-6)
    assert (vectors[2:] @ vectors[0]).tolist() == pytest.approx(
        [c for _, c in found.sentences], abs=1e-6
    )
    assert sentences == [s for s, _ in found.sentences]


def test_term_weights_stay_positive_for_common_terms():
    """BM25's idf is 0 for a term in half the documents and negative above: the weights are its
    softplus (Lucene's idf), so a small folder's common words still count, and rare ones lead."""
    bm25_idf = {"volcano": 0.0, "washington": -0.3, "erupted": 0.85, "1980": 0.0}
    weights = term_weights(bm25_idf, bm25_idf.get)
    assert weights["volcano"] == pytest.approx(math.log(2.0))
    assert 0.4 < weights["washington"] < weights["volcano"] < weights["erupted"]
    assert weights["erupted"] == pytest.approx(math.log1p(math.exp(0.85)))
    assert term_weights(["x"], {"x": 40.0}.get)["x"] == pytest.approx(40.0)
    assert term_weights(["x"], {"x": -40.0}.get)["x"] == pytest.approx(0.1)


def test_a_small_folder_keeps_the_document_about_the_question(embedder):
    """Four files: with the store's own idf, the page about the volcano is kept beside the one
    about its ash, though most of the question's words are in half the files."""
    from corrective_rag.store.hybrid import HybridStore

    docs = [
        Document(
            "volcano.md#0",
            "Mount St. Helens is an active stratovolcano in Washington state. Its eruption on "
            "May 18, 1980 was the deadliest volcanic event in United States history.",
        ),
        Document(
            "ash.md#0",
            "Volcanic ash from the 1980 eruption fell over eleven states. Airports closed across "
            "eastern Washington after Mount St. Helens erupted.",
        ),
        Document("bread.txt#0", "Sourdough bread is leavened by wild yeast and lactic acid."),
        Document("tea.txt#0", "Green tea is steamed or pan-fired soon after picking."),
    ]
    question = "Which volcano erupted in Washington in 1980?"
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add(docs)
        found = [h.document for h in store.retrieve(question, top_k=4)]
        evaluator = LocalEvaluator(embedder, idf=store.idf)
        kept = {v.document_id for v in evaluator.evaluate(question, found).verdicts if v.relevant}
    assert {"volcano.md#0", "ash.md#0"} == kept


def test_a_margin_keeps_only_documents_close_to_the_questions_best(embedder):
    """With a tiny margin only the question's best document is kept, whatever keep_at says."""
    documents = [ON_TOPIC, LONG_MIXED, OFF_TOPIC]
    loose = LocalEvaluator(embedder).evaluate(QUESTION, documents).verdicts
    tight = LocalEvaluator(embedder, weights=replace(DEFAULT_WEIGHTS, margin=1e-6))
    verdicts = tight.evaluate(QUESTION, documents).verdicts
    best = max(range(3), key=lambda i: verdicts[i].score)
    assert [i == best for i in range(3)] == [v.relevant for v in verdicts]
    assert sum(v.relevant for v in loose) >= 1


def test_confidence_is_the_probability_that_the_verdict_is_right(embedder):
    """A keep's confidence is the judge's probability of relevance p, a rejection's is 1 - p."""
    evaluator = LocalEvaluator(embedder)
    documents = [ON_TOPIC, LONG_MIXED, OFF_TOPIC]
    features = evaluator.features(QUESTION, documents)
    verdicts = evaluator.evaluate(QUESTION, documents).verdicts
    for verdict, found in zip(verdicts, features, strict=True):
        p = DEFAULT_WEIGHTS.score(found)
        assert (p if verdict.relevant else 1.0 - p) == pytest.approx(verdict.confidence, abs=1e-4)
