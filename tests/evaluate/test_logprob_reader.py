"""The token-probability reader: the parser's verdicts, read at their own value, soundly or not.

Mutation testing (mutmut, see setup.cfg [mutmut]) runs these tests against
``corrective_rag/evaluate/logprobs.py`` and ``corrective_rag/evaluate/spans.py``. The survivors
that change no behaviour, and why:

- ``_SCAN = ...scan_once`` and ``scanstring(text, pos + 1, True)`` with ``strict`` flipped: a
  reply the parser decoded holds no raw control character inside a key (json refused it), so
  the walk never meets one.
- ``maxsize=4096`` of the ``_side`` cache changed: a cache size, not a result.
- ``lowest = min(lowest, logprob)`` starting from any value >= 0: listed log probabilities are
  all <= 0 by then, so the minimum is the same.
- In ``_Places``, ``side="right"`` -> ``"left"`` only differs for an empty token ending where
  the value starts, which no decision token is; covered where it matters by
  ``test_an_empty_token_before_the_value_is_passed_over``.
- In ``_Places``, ``text not in self.joined[first + 1 :]`` with ``first + 2``: the reply found
  again one character on would have to be one character repeated (a period of 1), which no
  reply holding a verdict is.

- In ``spans.py``: ``offsets = _counted(...)`` as ``None`` (always walk), ``finditer`` without
  its end, and the escaped-quote check changed: the count pass is a shortcut the walk answers
  alike (``test_the_key_count_pass_and_the_key_walk_agree``), and any key it miscounts (one in a
  string, one past the verdicts) makes more keys than verdicts, so it hands over to the walk;
  ``strict=None`` for ``strict=False``: both false.

Last run of ``spans.py`` with this file and ``test_logprob_verdicts.py``: 328 mutants, 322
killed, the 6 above survive.

Last full run (this file, ``test_logprob_verdicts.py`` and ``test_scoring.py`` against
``logprobs.py`` and ``scoring.py``): 349 mutants, 343 killed, 1 timeout, 5 survivors: the one
above, the three named in ``test_scoring.py``, and ``takes_logprobs`` answering True for an
object without ``complete``, now killed by ``test_takes_logprobs_reads_the_keyword``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.logprob_reader import long_reply
from corrective_rag.evaluate import spans
from corrective_rag.evaluate.logprobs import (
    side_probability,
    takes_logprobs,
    value_probabilities,
    word_probability,
)
from corrective_rag.evaluate.spans import relevant_values
from corrective_rag.llm.reply import read_logprobs
from corrective_rag.testing import TokenScript
from corrective_rag.testing.token_logprobs import lay_out, scripted_logprobs, token_script
from corrective_rag.types import TokenLogprob


def place(token: str, p: float, *alternatives: tuple[str, float]) -> TokenLogprob:
    """A token written with probability ``p``, listing itself and ``alternatives``."""
    top = ((token, math.log(p)), *((t, math.log(q)) for t, q in alternatives))
    return TokenLogprob(token, math.log(p), top)


def certain(text: str) -> TokenLogprob:
    return TokenLogprob(text, 0.0, ((text, 0.0), ("\u2400", -20.0)))


def tokens_for(text: str, decided: dict[int, float]) -> list[TokenLogprob]:
    """Tokens spelling ``text``: each ``true``/``false`` at an offset in ``decided`` a token of
    its own with P(true) = ``decided[offset]``, the rest in certain pieces."""
    out: list[TokenLogprob] = []
    at = 0
    for offset in sorted(decided):
        if offset > at:
            out.append(certain(text[at:offset]))
        word = "true" if text.startswith("true", offset) else "false"
        p_true = decided[offset]
        mine = p_true if word == "true" else 1 - p_true
        other = "false" if word == "true" else "true"
        out.append(place(word, mine, (" " + other, 1 - mine)))
        at = offset + len(word)
    if at < len(text):
        out.append(certain(text[at:]))
    return out


# -- a writer that knows where each value it writes is ------------------------------------------


class Writer:
    """Writes JSON by hand (repeated keys allowed) and records each boolean's offset."""

    def __init__(self, compact: bool) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.colon = ":" if compact else ": "
        self.comma = "," if compact else ", "
        self.booleans: list[int] = []

    def put(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def obj(self, pairs: Sequence[tuple[str, Any]]) -> dict[str, int | None]:
        """Write an object; the offset of each top-level key's last value if a boolean."""
        kept: dict[str, int | None] = {}
        self.put("{")
        for n, (key, value) in enumerate(pairs):
            self.put((self.comma if n else "") + json.dumps(key) + self.colon)
            kept[key] = self.size if isinstance(value, bool) else None
            if isinstance(value, bool):
                self.booleans.append(self.size)
            if isinstance(value, list):
                self.obj(value)
            else:
                self.put(json.dumps(value))
        self.put("}")
        return kept

    @property
    def text(self) -> str:
        return "".join(self.parts)


ID_KEYS = st.sampled_from(["id", "document_id", "doc_id"])
IDS = st.sampled_from(["a", "b", "c", "zz"])
VALUE = st.one_of(st.booleans(), st.just("yes"), st.just(None), st.just(1))
PAIR = st.one_of(
    st.tuples(ID_KEYS, IDS),
    st.tuples(st.sampled_from(["relevant", "is_relevant"]), VALUE),
    st.tuples(st.just("reasoning"), st.sampled_from(['says "relevant": true', "ok", "\\u0072"])),
    st.tuples(st.just("score"), st.floats(0, 1)),
    st.tuples(
        st.just("details"),
        st.tuples(st.tuples(st.just("id"), IDS), st.tuples(st.just("relevant"), st.booleans())).map(
            list
        ),
    ),
)
VERDICT = st.lists(PAIR, min_size=1, max_size=7)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(VERDICT, min_size=1, max_size=5), st.booleans(), st.sampled_from([1, 3]))
def test_each_verdict_is_read_at_the_value_the_parser_keeps(verdicts, compact, sent_count):
    """Any mix of id keys, repeated keys, nested objects and quoted keys: each id gets the
    probability of the very value json keeps, at the id the evaluator's rule gives it."""
    sent = ["a", "b", "c"][:sent_count]
    out = Writer(compact)
    out.put("{" + json.dumps("verdicts") + out.colon + "[")
    kept = []
    for n, pairs in enumerate(verdicts):
        out.put(out.comma if n else "")
        kept.append(out.obj(pairs))
    out.put("]}")
    text = out.text
    # every boolean gets a P(true) of its own, so a value read at the wrong place shows
    chances = {at: 0.05 + 0.9 * n / len(out.booleans) for n, at in enumerate(out.booleans)}
    expected: dict[str, float] = {}
    for item, offsets in zip(json.loads(text)["verdicts"], kept, strict=True):
        doc_id = item.get("id", item.get("document_id", item.get("doc_id")))  # the parser's
        if doc_id is None and len(sent) == 1:
            doc_id = sent[0]
        key = "relevant" if "relevant" in item else "is_relevant"
        at = offsets.get(key)  # a boolean's offset, json's last of the key (None: no boolean)
        if doc_id in sent and at is not None:
            expected.setdefault(doc_id, chances[at])  # an id's first boolean answer
    read = value_probabilities(text, tokens_for(text, chances), ids=sent)
    assert expected == pytest.approx(read)


def test_issue_cases_map_as_the_parser_does():
    """doc_id before id, a nested {"id"}, a repeated relevant key: each read as json reads it."""
    text = (
        '{"verdicts": [{"doc_id": "b", "id": "a", "relevant": true},'
        ' {"id": "b", "details": {"id": "a", "relevant": true}, "relevant": false},'
        ' {"id": "c", "relevant": false, "relevant": true}]}'
    )
    values = relevant_values(text, ["a", "b", "c"])
    assert [("a", True), ("b", False), ("c", True)] == [(v.document_id, v.value) for v in values]
    offsets = [text.index("true"), text.index("false"), text.rindex("true")]
    assert offsets == [v.offset for v in values]
    nested, dropped = text.index("true", offsets[0] + 1), text.rindex("false")
    chances = {offsets[0]: 0.9, offsets[1]: 0.3, offsets[2]: 0.6, nested: 0.99, dropped: 0.01}
    read = value_probabilities(text, tokens_for(text, chances), ids=["a", "b", "c"])
    assert {"a": 0.9, "b": 0.3, "c": 0.6} == pytest.approx(read)
    # the verdicts are the object's own, under its last "verdicts" key
    nested = (
        '{"x": {"verdicts": [{"id": "a", "relevant": false}]},'
        ' "verdicts": [{"id": "a", "relevant": true}]}'
    )
    assert [("a", nested.index("true"), True)] == relevant_values(nested, ["a"])
    twice = (
        '{"verdicts": [{"id": "a", "relevant": false}],'
        ' "verdicts": [{"id": "a", "relevant": true}]}'
    )
    assert [("a", twice.index("true"), True)] == relevant_values(twice, ["a"])
    # a key spelled with an escape is the same key to json
    escaped = '{"verdicts": [{"id": "a", "relevant": false, "rel\\u0065vant": true}]}'
    (value,) = relevant_values(escaped, ["a"])
    assert (True, escaped.index("true")) == (value.value, value.offset)


def test_a_cut_reply_a_fenced_reply_and_a_bare_verdict_are_read_as_parsed():
    """The parser salvages a cut reply's complete verdicts, skips a fence, reads a bare object."""
    cut = '{"verdicts": [{"id": "a", "relevant": true}, {"id": "b", "relevant": fal'
    assert [("a", True)] == [(v.document_id, v.value) for v in relevant_values(cut, ["a", "b"])]
    fenced = 'Sure!\n```json\n{"verdicts": [{"id": "a", "relevant": false}]}\n```'
    (value,) = relevant_values(fenced, ["a"])
    assert ("a", fenced.index("false"), False) == value
    bare = '{"relevant": true, "score": 0.9}'
    assert [("a", True)] == [(v.document_id, v.value) for v in relevant_values(bare, ["a"])]
    assert [] == relevant_values(bare, ["a", "b"])  # a bare verdict for two documents: none
    named = '{"id": "a", "relevant": true}'
    assert [] == relevant_values(named, ["a", "b"])
    assert [("a", named.index("true"), True)] == relevant_values(named, ["a"])
    assert [] == relevant_values('{"verdicts": {"id": "a", "relevant": true}}', ["a"])
    assert [] == relevant_values("no json", ["a"])
    # the same, walked key by key: a bare verdict repeating its key, a cut reply nesting one
    bare = '{"relevant": false, "score": 0.9, "relevant": true}'
    assert [("a", bare.rindex("true"), True)] == relevant_values(bare, ["a"])
    cut = '{"verdicts": [{"id": "a", "x": {"relevant": false}, "relevant": true}, {"id": "b'
    assert [("a", cut.index("true"), True)] == relevant_values(cut, ["a", "b"])
    empty = '{"verdicts": [{}, {"id": "a", "x": {}, "relevant": true}]}'
    assert [("a", empty.index("true"), True)] == relevant_values(empty, ["a"])
    assert [] == relevant_values('{"verdicts": []}', ["a"])
    assert [] == relevant_values(None, ["a"])  # type: ignore[arg-type]


def test_the_object_is_the_one_the_parser_picks():
    """Prose or a bare verdict before a fenced reply: the fence is read first, as the lenient
    parser reads it (here with a key json spells ``verdicts`` but no pattern finds); a bare
    verdict is a verdict only with ``relevant``, ``score`` or ``label``; deep nesting before the
    verdicts is passed over as the parser passes over it."""
    fenced = (
        '{"id": "a", "relevant": false}\n```json\n'
        '{"verd\\u0069cts": [{"id": "a", "relevant": true}]}\n```'
    )
    assert [("a", fenced.index("true"), True)] == relevant_values(fenced, ["a"])
    for bare in ('{"is_relevant": true, "score": 0.9}', '{"is_relevant": true, "label": "high"}'):
        assert [("a", bare.index("true"), True)] == relevant_values(bare, ["a"])
    assert [] == relevant_values('{"is_relevant": true}', ["a"])
    deep = '{"x": ' + "[" * 3000 + "]" * 3000 + ', "verdicts": [{"id": "a", "relevant": true}]}'
    assert [("a", deep.index("true"), True)] == relevant_values(deep, ["a"])


def test_the_key_count_pass_and_the_key_walk_agree():
    """Two ways to the same offsets: flat verdicts are counted in one pass (the fast way, as
    the parser's verdict list, a cut reply's or a bare verdict), and the count agrees with the
    walk; verdicts holding objects or a repeated key are walked."""
    flat = [
        ('{"verdicts": [{"id": "a", "relevant": true}, {"id": "b", "is_relevant": false}]}', 2),
        ('{"verdicts": [{"id": "a", "relevant": true, "is_relevant": false}, {"id": "b', 1),
        ('{"id": "a", "relevant": true}', 1),
        ('  {"verdicts":[{"id":"a","relevant":false,"missing":["x"]}]}  ', 1),
    ]
    for text, count in flat:
        verdicts = spans._verdicts(text, None)
        assert verdicts is not None and count == len(verdicts.items)
        assert spans._walked(text, verdicts) == spans._counted(text, verdicts)
    walked = [
        '{"verdicts": [{"id": "a", "x": {"relevant": false}, "relevant": true}]}',
        '{"verdicts": [{"id": "a", "relevant": false, "relevant": true}]}',
        '{"verdicts": [{"id": "a", "reasoning": "\\u00e9", "relevant": true}]}',
        '{"verdicts": [{"id": "a", "x\\"relevant": 1, "relevant": true}]}',
    ]
    for text in walked:
        verdicts = spans._verdicts(text, None)
        assert verdicts is not None
        assert spans._counted(text, verdicts) is None
        assert [text.rindex("true")] == spans._walked(text, verdicts)


def test_an_id_answered_twice_is_read_at_its_first_answer_only():
    """The first answer is the one read, even when it cannot be read and the second could."""
    text = '{"verdicts": [{"id": "a", "relevant": true}, {"id": "a", "relevant": true}]}'
    first, second = (m for m in (text.index("true"), text.rindex("true")))
    tokens = tokens_for(text, {first: 0.7, second: 0.2})
    assert {"a": pytest.approx(0.7)} == value_probabilities(text, tokens)
    unread = [t if i != 1 else TokenLogprob("true", -0.1) for i, t in enumerate(tokens)]
    assert {} == value_probabilities(text, unread)


# -- soundness ------------------------------------------------------------------------------------

TEXT = '{"verdicts": [{"id": "a", "relevant": false}, {"id": "b", "relevant": true}]}'
AT_A, AT_B = TEXT.index("false"), TEXT.index("true")


@pytest.mark.parametrize(
    "unsound",
    [
        TokenLogprob("false", math.log(0.97), ()),  # top_logprobs: []
        TokenLogprob("false", math.log(0.97), (("false", math.log(0.97)),)),  # only itself
        TokenLogprob("false", float("nan"), (("false", float("nan")), ("true", -3.0))),
        TokenLogprob("false", -0.03, (("false", -0.03), ("true", float("nan")))),
        TokenLogprob("false", -0.03, (("false", -0.03), ("true", float("inf")))),
        TokenLogprob("false", -0.03, (("false", -0.03), ("true", -float("inf")))),
        TokenLogprob("false", 0.2, (("false", 0.2), ("true", -3.0))),  # positive
        TokenLogprob("false", -0.03, (("false", -0.03), ("true", 1e-3))),
    ],
)
def test_an_unsound_place_gives_no_probability_and_leaves_the_others(unsound):
    """No alternative, NaN, an infinity or a positive log probability: that verdict has no
    probability (never 0.5); the other is still read."""
    tokens = tokens_for(TEXT, {AT_A: 0.1, AT_B: 0.8})
    index = next(i for i, t in enumerate(tokens) if t.token == "false")
    tokens[index] = unsound
    assert {"b": pytest.approx(0.8)} == value_probabilities(TEXT, tokens)


def test_alternatives_of_one_side_are_summed():
    """`` true`` 0.5 and ``true`` 0.3 against `` false`` 0.1 and ``false`` 0.1: P(true) 0.8."""
    text = '{"verdicts": [{"id": "b", "relevant": true}]}'
    cut = text.index(" true")
    value = place(" true", 0.5, ("true", 0.3), (" false", 0.1), ("false", 0.1))
    tokens = [certain(text[:cut]), value, certain(text[cut + 5 :])]
    assert {"b": pytest.approx(0.8)} == value_probabilities(text, tokens)


def test_one_listed_side_is_bounded_by_the_smallest_listed_probability():
    """Only one side listed: the other had at most the smallest listed probability."""
    for text, chosen, expected in (("true", 0.6, 0.6 / 0.8), ("false", 0.6, 0.2 / 0.8)):
        tokens = [certain('{"relevant": '), place(text, chosen, ("x", 0.2)), certain("}")]
        read = value_probabilities(f'{{"relevant": {text}}}', tokens, ids=["a"])
        assert {"a": pytest.approx(expected)} == read


def test_only_a_json_boolean_counts_for_a_side_at_a_value():
    """At a JSON value, ``True`` and a quoted ``"false"`` are no booleans (json would not read
    them so) and count for no side; a certain token (log probability 0) is read."""
    text = '{"relevant": true}'
    value = place(" true", 0.5, (" True", 0.2), (' "false"', 0.2), (" false", 0.1))
    tokens = [certain('{"relevant":'), value, certain("}")]
    assert {"a": pytest.approx(0.5 / 0.6)} == value_probabilities(text, tokens, ids=["a"])
    sure = TokenLogprob(" true", 0.0, ((" true", 0.0), (" false", -30.0)))
    tokens = [certain('{"relevant":'), sure, certain("}")]
    assert {"a": pytest.approx(1.0)} == value_probabilities(text, tokens, ids=["a"])


def test_the_value_inside_a_larger_token_is_read_at_the_value():
    """``{"relevant":true`` in one token: alternatives are compared past the same text."""
    text = '{"verdicts": [{"id": "a", "relevant":true}]}'
    cut = text.index('"relevant"')
    token = text[cut : cut + len('"relevant":true')]
    value = place(
        token,
        0.7,
        ('"reason', 0.04),  # another text before: neither side
        ('"relevant": false', 0.2),  # the same text before, a space aside: false
        ('"relevant":', 0.05),  # writes no value: neither side
        ('"rel', 0.01),  # shorter than the text before the value: neither side
    )
    tokens = [certain(text[:cut]), value, certain(text[cut + len(token) :])]
    assert {"a": pytest.approx(0.7 / 0.9)} == value_probabilities(text, tokens)


def test_an_empty_token_before_the_value_is_passed_over():
    """A server's empty token where the value starts is not the place the value is read at."""
    text = '{"relevant": true}'
    tokens = [certain('{"relevant": '), TokenLogprob("", 0.0), place("true", 0.6, ("false", 0.4))]
    tokens.append(certain("}"))
    assert {"a": pytest.approx(0.6)} == value_probabilities(text, tokens, ids=["a"])


def test_tokens_that_hold_the_reply_once_are_read_and_others_not():
    """A fence or a thinking block the server kept out of the content is passed over; tokens
    that do not hold the reply, or hold it twice, are not read."""
    tokens = tokens_for(TEXT, {AT_A: 0.1, AT_B: 0.8})
    fenced = [certain("<think>x</think>```json\n"), *tokens, certain("\n```")]
    assert {"a": 0.1, "b": 0.8} == pytest.approx(value_probabilities(TEXT, fenced))
    trailed = [*tokens, certain("\n```")]
    assert {"a": 0.1, "b": 0.8} == pytest.approx(value_probabilities(TEXT, trailed))
    assert {} == value_probabilities(None, tokens)  # type: ignore[arg-type]
    assert {} == value_probabilities(TEXT + " ", tokens)
    assert {} == value_probabilities(TEXT, [*tokens, *tokens])
    assert {} == value_probabilities(TEXT, [])


def test_word_probability_reads_the_first_word_soundly():
    """The pointwise judge's yes/no word: case aside, summed, and unsound places refused."""
    yes = [TokenLogprob("\n", 0.0), place("Yes", 0.3, ("yes", 0.1), ("No", 0.4), (" no", 0.2))]
    assert 0.4 == pytest.approx(word_probability(yes))
    assert word_probability([TokenLogprob("Yes", -0.1)]) is None
    assert word_probability([TokenLogprob("Yes", -0.1, (("Yes", -0.1),))]) is None
    assert word_probability([place("Yes", 0.5, ("No", 0.5)), place("x", 1.0)]) == 0.5
    nan = TokenLogprob("Yes", -0.1, (("No", float("nan")),))
    assert word_probability([nan]) is None
    assert side_probability(TokenLogprob("x", 0.0), "true", "false") is None
    assert word_probability([TokenLogprob(" ", 0.0)]) is None
    quoted = [certain('"'), place("Yes", 0.6, ("No", 0.4))]  # a quote before the word
    assert 0.6 == pytest.approx(word_probability(quoted))
    assert 0.7 == pytest.approx(word_probability([place('"Yes', 0.7, ('"no', 0.3))]))
    assert word_probability([place("Maybe", 0.5, ("Perhaps", 0.5))]) is None


SCRIPTS = [
    TokenScript(layout=layout, split=split, alternatives=alternatives)
    for layout in ("spaced", "compact", "indented")
    for split in ("word", "halves", "joined", "inside")
    for alternatives in ("opposite", "spellings")
]
GRADED = json.dumps(
    {"verdicts": [{"id": "on", "relevant": True, "score": 0.9}, {"id": "off", "relevant": False}]}
)


def scripted(text: str, script: TokenScript | str) -> tuple[str, list[TokenLogprob]]:
    """The reply and tokens the scripted server sends for ``text`` (as the client reads them)."""
    text = lay_out(text, token_script(script))
    sent = scripted_logprobs(text, script, {"logprobs": True, "top_logprobs": 5})
    return text, list(read_logprobs({"content": sent}, text) or ())


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: f"{s.layout}-{s.split}-{s.alternatives}")
def test_every_layout_and_token_split_is_read_at_the_written_probability(script):
    """Compact, spaced and indented JSON; a value alone, in halves, with its key, inside a
    larger token; one spelling or several: P(true) is what the server put on it."""
    text, tokens = scripted(GRADED, script)
    assert ('"relevant":true' in text) == (script.layout == "compact")
    assert {"on": 0.8, "off": 0.2} == pytest.approx(value_probabilities(text, tokens))


@pytest.mark.parametrize("alternatives", ["none", "self"])
def test_a_script_listing_no_alternative_gives_no_probability(alternatives):
    """top_logprobs [] or only the token itself: nothing is read from the reply."""
    text, tokens = scripted(GRADED, TokenScript(alternatives=alternatives))
    assert tokens
    assert {} == value_probabilities(text, tokens)


def test_token_strings_that_spell_the_reply_are_kept_as_sent():
    """Bytes are read only where the strings do not spell the reply."""
    content = [{"token": "ab", "logprob": -0.1, "bytes": [120], "top_logprobs": []}]
    assert "ab" == read_logprobs({"content": content}, "ab")[0].token
    assert "x" == read_logprobs({"content": content}, "x")[0].token
    assert "ab" == read_logprobs({"content": content}, "zz")[0].token


def test_malformed_logprobs_are_dropped_and_odd_numbers_kept_for_the_reader():
    """A wrong type or too many tokens read as none; NaN and positive values are kept as sent,
    for the reader to refuse their place only."""
    good = {"token": "a", "logprob": -0.1, "top_logprobs": [{"token": "b", "logprob": -1}] * 30}
    assert 20 == len(read_logprobs({"content": [good]})[0].top)
    assert read_logprobs({"content": [{"token": 1, "logprob": 0}]}) is None
    assert read_logprobs({"content": [{"token": "a", "logprob": 10**400}]}) is None
    assert read_logprobs({"content": [good] * 20_000}) is None
    assert read_logprobs("content") is None
    assert math.isnan(read_logprobs({"content": [{"token": "a", "logprob": math.nan}]})[0].logprob)
    assert 0.5 == read_logprobs({"content": [{"token": "a", "logprob": 0.5}]})[0].logprob


def test_thirty_thousand_verdicts_in_four_megabytes_are_all_read_right():
    """The benchmark's reply (benchmarks/logprob_reader.py times it): every id, its own P."""
    text, tokens, expected = long_reply(30_000)
    assert len(text) > 4_000_000
    assert expected == pytest.approx(value_probabilities(text, tokens))
    text, tokens, expected = long_reply(30_000, compact=True)
    assert expected == pytest.approx(value_probabilities(text, tokens))


def test_takes_logprobs_reads_the_keyword():
    """By name or ``**kwargs``: asked; without it, or without a ``complete`` at all: not asked."""

    class Named:
        def complete(self, messages, logprobs=None):
            return messages

    class Open:
        def complete(self, messages, **options):
            return messages

    class Old:
        def complete(self, messages, json_schema=None):
            return messages

    assert takes_logprobs(Named()) and takes_logprobs(Open())
    assert not takes_logprobs(Old())
    assert not takes_logprobs(object())
