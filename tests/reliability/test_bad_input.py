"""Bad input at every public entry point gets the package's own error, or a documented handling.

Each table row is (label, call, expected error class, words the message must contain). The
calls hit real parts: a real in-memory HybridStore with the real embedding model, real files,
a real scripted HTTP server for the LLM components.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corrective_rag import (
    Budget,
    CorrectiveRAGError,
    CorrectiveRAGOrchestrator,
    HybridStore,
    LLMEvaluator,
    LLMRewriter,
    LocalEvaluator,
    LocalRewriter,
    OpenAIChatClient,
    load_documents,
    run_batch,
)
from corrective_rag.calls import Retries, Timeouts
from corrective_rag.errors import ConfigError, DuplicateIdError, InputError
from corrective_rag.evaluate import FilterPolicy
from corrective_rag.runs import HistoryStore, result_from_json
from corrective_rag.runs.execution.queries import Query
from corrective_rag.testing import (
    ListRetriever,
    ScriptedEvaluator,
    ScriptedLLMServer,
    ScriptedRewriter,
)
from corrective_rag.types import Document, RewriteRequest

MEGABYTE = 1_000_000
HUGE_QUERY = "word " * (MEGABYTE // 5)  # 1 MB, under the 1 MiB limit: accepted
TOO_LONG_QUERY = "w" * (1_048_576 + 1)
SURROGATE = "moons of \ud800 Jupiter"  # what json.loads('"\\ud800"') or non-UTF-8 argv gives


def _check(call, error: type[Exception], words: str) -> None:
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, CorrectiveRAGError)
    message = str(info.value).lower()
    for word in words.lower().split("|"):
        assert word in message, message


# -- the store ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(embedder):
    with HybridStore.in_memory(embedder=embedder) as s:
        s.add([Document("a/b", "Jupiter has many moons."), Document("../x", "Saturn has rings.")])
        yield s


STORE_CASES = [
    ("retrieve empty", lambda s: s.retrieve(""), InputError, "query|empty"),
    ("retrieve whitespace", lambda s: s.retrieve(" \t\n"), InputError, "empty"),
    ("retrieve bytes", lambda s: s.retrieve(b"moons"), InputError, "string|bytes"),
    ("retrieve surrogate", lambda s: s.retrieve(SURROGATE), InputError, "unicode"),
    ("retrieve NUL", lambda s: s.retrieve("moons\x00"), InputError, "nul"),
    ("retrieve over 1 MiB", lambda s: s.retrieve(TOO_LONG_QUERY), InputError, "bytes"),
    ("top_k negative", lambda s: s.retrieve("moons", top_k=-1), ConfigError, "top_k"),
    ("top_k zero", lambda s: s.retrieve("moons", top_k=0), ConfigError, "top_k"),
    ("top_k absurd", lambda s: s.retrieve("moons", top_k=10**9), ConfigError, "top_k"),
    ("top_k float", lambda s: s.retrieve("moons", top_k=2.5), ConfigError, "top_k"),
    ("top_k bool", lambda s: s.retrieve("moons", top_k=True), ConfigError, "top_k"),
    ("where not mapping", lambda s: s.retrieve("moons", where="x"), InputError, "where"),
    ("add None", lambda s: s.add(None), InputError, "iterable"),
    ("add int", lambda s: s.add(5), InputError, "iterable"),
    ("add string", lambda s: s.add("text"), InputError, "document"),
    ("add dicts", lambda s: s.add([{"id": "d", "text": "t"}]), InputError, "document"),
    (
        "add duplicate ids",
        lambda s: s.add([Document("d", "one"), Document("d", "two")]),
        DuplicateIdError,
        "duplicate|'d'",
    ),
    (
        "upsert duplicate ids",
        lambda s: s.upsert([Document("d", "one"), Document("d", "two")]),
        DuplicateIdError,
        "duplicate",
    ),
    ("add stored id", lambda s: s.add([Document("a/b", "again")]), InputError, "upsert"),
    (
        "add 10 MB text",
        lambda s: s.add([Document("big", "lorem ipsum " * (10 * MEGABYTE // 12))]),
        InputError,
        "'big'|longer than|split",
    ),
    ("get None", lambda s: s.get(None), InputError, "iterable"),
    ("get one string", lambda s: s.get("a/b"), InputError, "list of ids"),
    ("get bytes", lambda s: s.get(b"a/b"), InputError, "list of ids"),
    ("get empty id", lambda s: s.get([""]), InputError, "non-empty"),
    ("delete None", lambda s: s.delete(None), InputError, "iterable"),
    ("delete ints", lambda s: s.delete([1, 2]), InputError, "strings"),
    ("delete duplicate ids", lambda s: s.delete(["a/b", "a/b"]), DuplicateIdError, "duplicate"),
]


@pytest.mark.parametrize(
    ("call", "error", "words"), [c[1:] for c in STORE_CASES], ids=[c[0] for c in STORE_CASES]
)
def test_store_rejects_bad_input(store, call, error, words):
    """Each bad store call raises the package's error naming the problem, and changes nothing."""
    before = sorted(store.ids())
    _check(lambda: call(store), error, words)
    assert before == sorted(store.ids())


DOCUMENT_CASES = [
    ("empty id", lambda: Document("", "text"), "id"),
    ("bytes id", lambda: Document(b"x", "text"), "id"),
    ("control id", lambda: Document("a\nb", "text"), "control"),
    ("long id", lambda: Document("x" * 513, "text"), "longer"),
    ("bytes text", lambda: Document("d", b"text"), "string"),
    ("empty text", lambda: Document("d", ""), "empty"),
    ("whitespace text", lambda: Document("d", " \n\t"), "empty"),
    ("NUL text", lambda: Document("d", "a\x00b"), "nul"),
    ("surrogate text", lambda: Document("d", SURROGATE), "unicode"),
    ("surrogate id", lambda: Document("d\udcff", "text"), "unicode"),
    ("nested metadata", lambda: Document("d", "t", {"k": [1]}), "metadata"),
]


@pytest.mark.parametrize(
    ("call", "words"), [c[1:] for c in DOCUMENT_CASES], ids=[c[0] for c in DOCUMENT_CASES]
)
def test_document_rejects_bad_fields(call, words):
    """A Document with an unusable id, text or metadata cannot be built."""
    _check(call, InputError, words)


def test_path_like_ids_are_plain_strings(store, tmp_path):
    """Ids such as "a/b" and "../x" are stored and found as strings; no file is made from them."""
    with HybridStore.open(tmp_path / "store", embedder=store.embedder) as disk:
        disk.add([Document("a/b", "Jupiter moons"), Document("../x", "Saturn rings")])
        assert ["a/b", "../x"] == [d.id for d in disk.get(["a/b", "../x"])]
        assert "../x" == disk.retrieve("Saturn rings", top_k=1)[0].document.id
        assert 1 == disk.delete(["../x"])
    assert [] == [p for p in tmp_path.rglob("*") if p.name in ("a", "b", "x")]


def test_huge_query_is_searched(store):
    """A 1 MB query (under the 1 MiB limit) is a documented handling: it is searched normally."""
    hits = store.retrieve(HUGE_QUERY + " Saturn rings", top_k=2)
    assert 2 == len(hits)


# -- files -------------------------------------------------------------------------------------


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


FILE_CASES = [
    ("txt not UTF-8", "bad.txt", b"caf\xe9 \xff\xfe", "not utf-8"),
    ("txt NUL bytes", "nul.txt", b"abc\x00def", "nul"),
    ("txt binary", "bin.txt", bytes(range(256)), "utf-8"),
    ("txt empty", "empty.txt", b"  \n", "empty"),
    ("jsonl not UTF-8", "bad.jsonl", b'{"id": "a", "text": "ok"}\n\xff\xfe\n', "not utf-8"),
    ("jsonl not JSON", "broken.jsonl", b'{"id": "a", "text": "ok"}\n{"id": "b", \n', ":2"),
    ("jsonl not object", "list.jsonl", b"[1, 2]\n", "object"),
    ("jsonl no id", "noid.jsonl", b'{"text": "x"}\n', "'id'"),
    ("jsonl NUL text", "nul.jsonl", b'{"id": "a", "text": "a\\u0000b"}\n', ":1|nul"),
    ("jsonl surrogate", "sur.jsonl", b'{"id": "a", "text": "a\\ud800b"}\n', ":1|unicode"),
    ("jsonl control id", "ctl.jsonl", b'{"id": "a\\nb", "text": "x"}\n', ":1|control"),
    (
        "jsonl duplicate id",
        "dup.jsonl",
        b'{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n',
        ":2|duplicate|:1",
    ),
    ("jsonl deep nesting", "deep.jsonl", b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested"),
    ("unknown suffix", "data.csv", b"a,b\n", "unsupported"),
]


@pytest.mark.parametrize(
    ("name", "data", "words"), [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES]
)
def test_load_documents_rejects_bad_files(tmp_path, name, data, words):
    """A bad file raises InputError naming the file (and the line, for JSONL)."""
    path = _write(tmp_path / name, data)
    _check(lambda: load_documents(path), InputError, f"{name}|{words}")


@pytest.mark.parametrize("paths", [None, 5, b"/tmp", [None], [""]], ids=repr)
def test_load_documents_rejects_bad_paths(paths):
    """Paths that are not paths raise InputError instead of a TypeError."""
    _check(lambda: load_documents(paths), InputError, "path")


def test_load_documents_missing_file(tmp_path):
    """A missing file is named in the error."""
    _check(lambda: load_documents(tmp_path / "nope.txt"), InputError, "nope.txt|no such")


@pytest.mark.slow
def test_ten_megabyte_file_is_chunked(tmp_path):
    """A 10 MB text file is a documented handling: cut into windows, each small enough to index."""
    sentence = "The quick brown fox jumps over the lazy dog near the river bank. "
    path = _write(tmp_path / "big.txt", (sentence * (10 * MEGABYTE // len(sentence))).encode())
    docs = load_documents(path, overlap=0)
    assert all(len(d.text) < 1_000_000 for d in docs)
    assert path.stat().st_size == docs[-1].metadata["end"]


# -- the orchestrator and its components -------------------------------------------------------


def _orchestrator(**kwargs):
    return CorrectiveRAGOrchestrator(
        ListRetriever([Document("a", "Jupiter has many moons.")]),
        ScriptedEvaluator({"a": 0.9}),
        ScriptedRewriter(["Jupiter moons"]),
        **kwargs,
    )


CONSTRUCTOR_CASES = [
    ("max_iterations 0", {"max_iterations": 0}, "max_iterations"),
    ("max_iterations negative", {"max_iterations": -3}, "max_iterations"),
    ("max_iterations absurd", {"max_iterations": 10**6}, "max_iterations"),
    ("top_k negative", {"top_k": -1}, "top_k"),
    ("top_k absurd", {"top_k": 10**7}, "top_k"),
    ("min_relevant 0", {"min_relevant": 0}, "min_relevant"),
    ("unknown policy", {"policy": "lenient"}, "preset"),
    ("policy not a policy", {"policy": 0.5}, "policy"),
    ("budget not a budget", {"budget": {"max_llm_calls": 3}}, "budget"),
    ("refine not bool", {"refine": "yes"}, "refine"),
    ("candidate_limit below top_k", {"top_k": 10, "candidate_limit": 5}, "candidate_limit"),
]


@pytest.mark.parametrize(
    ("kwargs", "words"), [c[1:] for c in CONSTRUCTOR_CASES], ids=[c[0] for c in CONSTRUCTOR_CASES]
)
def test_orchestrator_constructor_rejects_bad_settings(kwargs, words):
    """Out-of-range settings raise ConfigError naming the setting, before any work."""
    _check(lambda: _orchestrator(**kwargs), ConfigError, words)


def test_orchestrator_rejects_components_without_the_protocol():
    """A retriever that is not a Retriever is refused at construction."""
    _check(
        lambda: CorrectiveRAGOrchestrator(object(), ScriptedEvaluator({}), ScriptedRewriter([])),
        ConfigError,
        "retriever",
    )


RUN_CASES = [
    ("empty", lambda o: o.run(""), InputError, "empty"),
    ("whitespace", lambda o: o.run("   \n"), InputError, "empty"),
    ("None", lambda o: o.run(None), InputError, "string"),
    ("bytes", lambda o: o.run(b"which moons?"), InputError, "bytes"),
    ("binary bytes", lambda o: o.run(bytes(range(256))), InputError, "bytes"),
    ("NUL", lambda o: o.run("moons\x00"), InputError, "nul"),
    ("surrogate", lambda o: o.run(SURROGATE), InputError, "unicode"),
    ("over 1 MiB", lambda o: o.run(TOO_LONG_QUERY), InputError, "bytes"),
    ("top_k 0", lambda o: o.run("moons", top_k=0), ConfigError, "top_k"),
    ("top_k negative", lambda o: o.run("moons", top_k=-5), ConfigError, "top_k"),
    ("max_iterations 0", lambda o: o.run("moons", max_iterations=0), ConfigError, "iterations"),
    ("where not mapping", lambda o: o.run("moons", where=["x"]), ConfigError, "where"),
    ("budget not Budget", lambda o: o.run("moons", budget=5), ConfigError, "budget"),
]


@pytest.mark.parametrize(
    ("call", "error", "words"), [c[1:] for c in RUN_CASES], ids=[c[0] for c in RUN_CASES]
)
def test_run_rejects_bad_questions_and_overrides(call, error, words):
    """run() refuses bad questions and overrides with the package's error, before any work."""
    _check(lambda: call(_orchestrator()), error, words)


def test_run_accepts_a_one_megabyte_question():
    """A question of 1 MB (under the 1 MiB limit) runs: the documented limit is 1 MiB of UTF-8."""
    result = _orchestrator().run(HUGE_QUERY)
    assert HUGE_QUERY == result.question


POLICY_AND_BUDGET_CASES = [
    ("score above 1", lambda: FilterPolicy(high_score=1.5), "high_score"),
    ("score below 0", lambda: FilterPolicy(medium_score=-0.1), "medium_score"),
    ("confidence NaN", lambda: FilterPolicy(high_confidence=float("nan")), "high_confidence"),
    ("confidence inf", lambda: FilterPolicy(medium_confidence=float("inf")), "medium_confidence"),
    ("threshold string", lambda: FilterPolicy(correct_at="0.7"), "correct_at"),
    ("medium above high", lambda: FilterPolicy(high_score=0.4, medium_score=0.6), "medium_score"),
    ("incorrect above correct", lambda: FilterPolicy(incorrect_below=0.9), "incorrect_below"),
    ("min_relevant 0", lambda: FilterPolicy(min_relevant=0), "min_relevant"),
    ("empty name", lambda: FilterPolicy(name=" "), "name"),
    ("budget calls 0", lambda: Budget(max_llm_calls=0), "max_llm_calls"),
    ("budget calls negative", lambda: Budget(max_llm_calls=-1), "max_llm_calls"),
    ("budget calls float", lambda: Budget(max_llm_calls=2.5), "max_llm_calls"),
    ("budget tokens bool", lambda: Budget(max_tokens=True), "max_tokens"),
    ("budget cost NaN", lambda: Budget(max_cost_usd=float("nan")), "max_cost_usd"),
    ("budget seconds negative", lambda: Budget(max_seconds=-1.0), "max_seconds"),
]


@pytest.mark.parametrize(
    ("call", "words"),
    [c[1:] for c in POLICY_AND_BUDGET_CASES],
    ids=[c[0] for c in POLICY_AND_BUDGET_CASES],
)
def test_policy_and_budget_reject_out_of_range(call, words):
    """Thresholds outside 0..1 and non-positive limits raise ConfigError naming the field."""
    _check(call, ConfigError, words)


@pytest.fixture(scope="module")
def server():
    with ScriptedLLMServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def chat(server):
    return OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))


def _components(chat, embedder):
    return {
        "llm evaluator": LLMEvaluator(chat),
        "local evaluator": LocalEvaluator(embedder),
    }


EVALUATE_CASES = [
    ("empty question", "", [Document("a", "t")], "question"),
    ("bytes question", b"q", [Document("a", "t")], "string"),
    ("surrogate question", SURROGATE, [Document("a", "t")], "unicode"),
    ("documents None", "q", None, "document"),
    ("documents a string", "q", "abc", "document"),
    ("documents one Document", "q", Document("a", "t"), "document"),
    ("documents dicts", "q", [{"id": "a", "text": "t"}], "document"),
]


@pytest.mark.parametrize("which", ["llm evaluator", "local evaluator"])
@pytest.mark.parametrize(
    ("question", "documents", "words"),
    [c[1:] for c in EVALUATE_CASES],
    ids=[c[0] for c in EVALUATE_CASES],
)
def test_evaluators_reject_bad_input(chat, embedder, which, question, documents, words):
    """Both evaluators refuse bad questions and document lists with InputError, no LLM call."""
    evaluator = _components(chat, embedder)[which]
    _check(lambda: evaluator.evaluate(question, documents), InputError, words)


def test_llm_evaluator_rejects_repeated_ids(chat):
    """Two documents with one id in one call raise InputError (verdicts are keyed by id)."""
    docs = [Document("a", "one"), Document("a", "two")]
    _check(lambda: LLMEvaluator(chat).evaluate("q", docs), InputError, "repeat")


@pytest.mark.parametrize("which", ["llm", "local"])
@pytest.mark.parametrize("request_", [None, "question", {"question": "q"}], ids=repr)
def test_rewriters_reject_non_requests(chat, which, request_):
    """Both rewriters take only a RewriteRequest."""
    rewriter = LLMRewriter(chat) if which == "llm" else LocalRewriter()
    _check(lambda: rewriter.rewrite(request_), InputError, "rewriterequest")


def test_llm_rewriter_rejects_empty_question(chat):
    """A request with a blank question is refused before any call."""
    _check(lambda: LLMRewriter(chat).rewrite(RewriteRequest(" ", (), ())), InputError, "question")


CLIENT_CASES = [
    ("ftp url", lambda: OpenAIChatClient("ftp://host/v1", "m"), ConfigError, "base_url"),
    ("bytes url", lambda: OpenAIChatClient(b"http://x", "m"), ConfigError, "base_url"),
    ("empty model", lambda: OpenAIChatClient("http://x", " "), ConfigError, "model"),
    ("empty key", lambda: OpenAIChatClient("http://x", "m", api_key=""), ConfigError, "api_key"),
    (
        "key with newline",
        lambda: OpenAIChatClient("http://x", "m", api_key="sk-abc\n"),
        ConfigError,
        "api_key",
    ),
    (
        "key with space",
        lambda: OpenAIChatClient("http://x", "m", api_key="sk abc"),
        ConfigError,
        "api_key",
    ),
    (
        "concurrency 0",
        lambda: OpenAIChatClient("http://x", "m", max_concurrency=0),
        ConfigError,
        "max_concurrency",
    ),
    (
        "concurrency bool",
        lambda: OpenAIChatClient("http://x", "m", max_concurrency=True),
        ConfigError,
        "max_concurrency",
    ),
    ("timeout NaN", lambda: Timeouts(connect=float("nan")), ConfigError, "connect"),
    ("timeout inf", lambda: Timeouts(read=float("inf")), ConfigError, "read"),
    ("timeout 0", lambda: Timeouts(read=0), ConfigError, "read"),
    ("retries negative", lambda: Retries(max_retries=-1), ConfigError, "max_retries"),
    ("retries bool", lambda: Retries(max_retries=True), ConfigError, "max_retries"),
]


@pytest.mark.parametrize(
    ("call", "error", "words"), [c[1:] for c in CLIENT_CASES], ids=[c[0] for c in CLIENT_CASES]
)
def test_client_constructor_rejects_bad_settings(call, error, words):
    """Bad client settings raise ConfigError naming the setting."""
    _check(call, error, words)


def test_key_error_does_not_show_the_key():
    """The error for a malformed key does not quote the key."""
    with pytest.raises(ConfigError) as info:
        OpenAIChatClient("http://x", "m", api_key="sk-secret-canary\n")
    assert "canary" not in str(info.value) and "canary" not in repr(info.value)


COMPLETE_CASES = [
    ("no messages", [], {}, "messages"),
    ("a string", "hello", {}, "messages"),
    ("bad role", [{"role": "tool", "content": "x"}], {}, "role"),
    ("bytes content", [{"role": "user", "content": b"x"}], {}, "content"),
    ("max_tokens 0", [{"role": "user", "content": "x"}], {"max_tokens": 0}, "max_tokens"),
    ("temperature NaN", [{"role": "user", "content": "x"}], {"temperature": float("nan")}, "temp"),
    ("temperature 5", [{"role": "user", "content": "x"}], {"temperature": 5}, "temperature"),
]


@pytest.mark.parametrize(
    ("messages", "kwargs", "words"),
    [c[1:] for c in COMPLETE_CASES],
    ids=[c[0] for c in COMPLETE_CASES],
)
def test_complete_rejects_bad_arguments(chat, server, messages, kwargs, words):
    """complete() refuses malformed messages and arguments without sending a request."""
    sent = server.request_count
    _check(lambda: chat.complete(messages, **kwargs), InputError, words)
    assert sent == server.request_count


def test_complete_sends_a_huge_binary_looking_message(chat):
    """A 1 MB message of arbitrary code points (control characters, surrogates) is sent as JSON."""
    text = "".join(chr(c) for c in range(1, 0xD800)) * 20 + "\ud800"
    assert "ok" == chat.complete([{"role": "user", "content": text[:MEGABYTE]}]).text


# -- batch, history, results -------------------------------------------------------------------


QUERY_FILE_CASES = [
    ("not JSON", b'{"id": "q1", "query": "a"}\n{"id": "q2", "que\n', "line 2|json"),
    ("not UTF-8", b'{"id": "q1", "query": "a"}\n\xff\xfe\xfa\n', "line 2|utf-8"),
    ("a list", b'["q1", "a"]\n', "line 1|object"),
    ("no id", b'{"query": "a"}\n', "line 1|'id'"),
    ("empty query", b'{"id": "q1", "query": "  "}\n', "line 1|'query'"),
    ("query not string", b'{"id": "q1", "query": 5}\n', "line 1|'query'"),
    ("duplicate id", b'{"id": "q", "query": "a"}\n{"id": "q", "query": "b"}\n', "line 2|dup"),
    ("NUL in query", b'{"id": "q", "query": "a\\u0000"}\n', "line 1|nul"),
    ("surrogate in query", b'{"id": "q", "query": "a\\udcff"}\n', "line 1|unicode"),
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000 + b"\n", "line 1|nested"),
]


@pytest.mark.parametrize(
    ("data", "words"), [c[1:] for c in QUERY_FILE_CASES], ids=[c[0] for c in QUERY_FILE_CASES]
)
def test_run_batch_rejects_malformed_query_files(tmp_path, data, words):
    """A bad queries file raises InputError naming the line, before any query runs or is written."""
    queries = _write(tmp_path / "q.jsonl", data)
    out = tmp_path / "out.jsonl"
    calls: list[str] = []
    _check(
        lambda: run_batch(queries, calls.append, out_path=out, progress=False),
        InputError,
        words,
    )
    assert [] == calls and not out.exists()


BATCH_ARG_CASES = [
    ("concurrency 0", {"concurrency": 0}, ConfigError, "concurrency"),
    ("concurrency negative", {"concurrency": -2}, ConfigError, "concurrency"),
    ("shard string", {"shard": "0/2"}, ConfigError, "shard"),
    ("shard out of range", {"shard": (3, 2)}, ConfigError, "shard"),
    ("shard n zero", {"shard": (0, 0)}, ConfigError, "shard"),
    ("queries not Query", {"queries": ["q1"]}, InputError, "query"),
    ("queries None", {"queries": None}, InputError, "queries"),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [c[1:] for c in BATCH_ARG_CASES],
    ids=[c[0] for c in BATCH_ARG_CASES],
)
def test_run_batch_rejects_bad_arguments(tmp_path, kwargs, error, words):
    """Bad run_batch arguments raise the package's error naming the argument."""
    args = {"queries": [Query("q1", "a")], "out_path": tmp_path / "o.jsonl", **kwargs}
    queries = args.pop("queries")
    _check(lambda: run_batch(queries, lambda q: None, progress=False, **args), error, words)


def test_run_batch_refuses_a_folder_as_results_file(tmp_path):
    """A results path that is a folder raises InputError, not IsADirectoryError."""
    _check(
        lambda: run_batch([Query("q", "a")], lambda q: None, out_path=tmp_path, progress=False),
        InputError,
        "folder",
    )


def test_batch_query_failure_with_unencodable_message_is_recorded(tmp_path):
    """A query whose error message holds a lone surrogate gets a valid JSON error line."""

    def run_one(question):
        raise RuntimeError("bad \udcff byte")

    out = tmp_path / "o.jsonl"
    summary = run_batch([Query("q", "a")], run_one, out_path=out, progress=False)
    assert 1 == summary.failures
    line = json.loads(out.read_text(encoding="utf-8"))
    assert "bad \udcff byte" == line["error"]["message"]


def test_batch_resume_with_a_torn_tail_and_a_bad_line(tmp_path):
    """A torn last line is cut off on resume; a corrupt middle line is an error naming it."""
    out = tmp_path / "o.jsonl"
    run_batch([Query("q1", "a")], _orchestrator().run, out_path=out, progress=False)
    whole = out.read_bytes()
    out.write_bytes(whole + b'{"id": "q2", "status": "o')
    summary = run_batch(
        [Query("q1", "a"), Query("q2", "b")], _orchestrator().run, out_path=out, progress=False
    )
    assert (2, 1) == (summary.queries, summary.skipped)
    out.write_bytes(whole + b"\xff\xfe not json\n" + whole)
    _check(
        lambda: run_batch([Query("q1", "a")], _orchestrator().run, out_path=out, progress=False),
        InputError,
        "line 2",
    )


RESULT_JSON_CASES = [
    ("empty", "", "json"),
    ("None", None, "json text"),
    ("not UTF-8 bytes", b"\xff\xfe\xfa", "json"),
    ("a list", "[]", "object"),
    ("deep nesting", "[" * 100_000 + "]" * 100_000, "json"),
    ("missing fields", '{"run_id": "r"}', "missing"),
    ("wrong type", '{"run_id": 5}', "run_id"),
]


@pytest.mark.parametrize(
    ("text", "words"), [c[1:] for c in RESULT_JSON_CASES], ids=[c[0] for c in RESULT_JSON_CASES]
)
def test_result_from_json_rejects_bad_text(text, words):
    """result_from_json raises InputError for anything that is not a run result."""
    _check(lambda: result_from_json(text), InputError, words)


HISTORY_CASES = [
    ("None", None, ConfigError, "path"),
    ("empty", "", ConfigError, "path"),
    ("an int", 5, ConfigError, "path"),
]


@pytest.mark.parametrize(
    ("path", "error", "words"), [c[1:] for c in HISTORY_CASES], ids=[c[0] for c in HISTORY_CASES]
)
def test_history_store_rejects_bad_paths(path, error, words):
    """HistoryStore refuses paths that are not paths."""
    _check(lambda: HistoryStore(path), error, words)


def test_history_store_refuses_folder_and_non_results(tmp_path):
    """A folder is refused as a history file, and appending a non-result raises InputError."""
    _check(lambda: HistoryStore(tmp_path), ConfigError, "directory")
    _check(
        lambda: HistoryStore(tmp_path / "h.jsonl").append({"run_id": "x"}), InputError, "runresult"
    )


def test_history_store_skips_torn_and_binary_lines(tmp_path):
    """Torn or non-UTF-8 lines are skipped (documented); a deep-nesting line raises InputError."""
    store = HistoryStore(tmp_path / "h.jsonl")
    result = _orchestrator().run("Which moons?")
    store.append(result)
    with open(store.path, "ab") as fh:
        fh.write(b'{"run_id": "torn\xff\xfe')
    store.append(result)
    assert [result.run_id] * 2 == [r.run_id for r in store]
    with open(store.path, "ab") as fh:
        fh.write(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    _check(store.list, InputError, "nested")


def test_no_file_is_created_from_ids_or_queries(tmp_path, monkeypatch):
    """Running a batch with ids like "../x" writes only the results file."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out" / "r.jsonl"
    queries = [Query("../evil", "Which moons?"), Query("a/b", "Which moons?")]
    run_batch(queries, _orchestrator().run, out_path=out, progress=False)
    assert [out] == [p for p in tmp_path.rglob("*") if p.is_file()]
