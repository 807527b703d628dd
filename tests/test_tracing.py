"""OpenTelemetry spans, read back with the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from corrective_rag import observe
from corrective_rag.errors import ConfigError, InputError, LLMResponseError
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.generate.llm import LLMGenerator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.observe import spans as tracing
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.testing import ScriptedLLMServer
from corrective_rag.testing.fakes import ListRetriever, ScriptedEvaluator, ScriptedRewriter
from corrective_rag.testing.faults import Fault
from corrective_rag.types import Document, Hit

QUESTION = "Which moons of Jupiter are the largest?"
REWRITE = "Galilean moons volcanoes Io"

CORPUS = [
    Document("ganymede", "Ganymede, a moon of Jupiter, is the largest moon in the Solar System."),
    Document("callisto", "Callisto is the second largest moon of Jupiter, heavily cratered."),
    Document("io", "Io, innermost of the Galilean moons, is covered in active volcanoes."),
    Document("titan", "Titan is the largest moon of Saturn, with a thick hazy atmosphere."),
    Document("bread", "Sourdough bread rises thanks to wild yeast."),
    Document("river", "The Nile flows north into the Mediterranean Sea."),
]

RELEVANT = {"ganymede": 0.95, "callisto": 0.85, "io": 0.8}

_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _provider() -> Iterator[None]:
    """One SDK provider for the process (OpenTelemetry allows one), exporting to memory; the
    exporter stops at the end, so later tests' spans are not kept."""
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        current = TracerProvider()
        trace.set_tracer_provider(current)
    current.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    yield
    _EXPORTER.shutdown()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _EXPORTER.clear()
    observe.capture_content(False)
    yield _EXPORTER
    observe.capture_content(False)


def _ours(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [
        s for s in exporter.get_finished_spans() if s.instrumentation_scope.name == "corrective_rag"
    ]


def _named(found: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in found if s.name == name]


def _op(found: list[ReadableSpan], operation: str) -> list[ReadableSpan]:
    """The spans of one GenAI operation (``iteration``, ``retrieval``, ``chat``), any name."""
    return [s for s in found if s.attributes.get("gen_ai.operation.name") == operation]


def _hybrid_run(embedder: SentenceTransformerEmbedder, **options: object) -> object:
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add(CORPUS)
        orch = CorrectiveRAGOrchestrator(
            store,
            ScriptedEvaluator(RELEVANT, default=0.05),
            ScriptedRewriter([REWRITE]),
            top_k=2,
            max_iterations=4,
        )
        if options.pop("aio", False):
            return asyncio.run(_under_parent(orch))
        return orch.run(QUESTION)


async def _under_parent(orch: CorrectiveRAGOrchestrator) -> object:
    with trace.get_tracer("app").start_as_current_span("request"):
        return await orch.arun(QUESTION)


def test_a_two_iteration_run_leaves_run_iteration_and_search_spans_parented(spans, embedder):
    """A two-iteration offline run: one run span, two iteration spans under it, and under each
    iteration one retrieval span per lane, carrying the stop reason, kept ids and lanes."""
    result = _hybrid_run(embedder)
    found = _ours(spans)
    [run] = _named(found, "corrective_rag.run")
    iterations = _op(found, "iteration")
    searches = _op(found, "retrieval")
    assert 2 == len(iterations) == result.iterations
    assert 3 <= len(found)
    assert {run.context.span_id} == {s.parent.span_id for s in iterations}
    by_index = {s.attributes["corrective_rag.iteration"]: s for s in iterations}
    lanes = {
        index: sorted(
            s.attributes["corrective_rag.lane"]
            for s in searches
            if s.parent.span_id == span.context.span_id
        )
        for index, span in by_index.items()
    }
    # the loop's free feedback lane (the kept document's bridge name) is searched beside them
    assert {1: ["question"], 2: ["feedback", "question", "rewrite"]} == lanes
    assert {s.context.trace_id for s in found} == {run.context.trace_id}
    assert "enough_relevant" == run.attributes["corrective_rag.stop_reason"]
    assert list(result.kept_ids) == list(run.attributes["corrective_rag.kept_ids"])
    assert result.run_id == run.attributes["corrective_rag.run_id"]
    assert list(result.history[0].kept_ids) == list(
        by_index[1].attributes["corrective_rag.kept_ids"]
    )
    assert "retrieval" == searches[0].attributes["gen_ai.operation.name"]
    assert SpanKind.INTERNAL == searches[0].kind
    # the names say which iteration and which lane
    assert {f"iteration {i}" for i in (1, 2)} == {s.name for s in iterations}
    assert {f"retrieval {s.attributes['corrective_rag.lane']}" for s in searches} == {
        s.name for s in searches
    }


def _tree(found: list[ReadableSpan]) -> list[str]:
    """The span names as a trace viewer lists them: children under their parent, indented by
    two spaces a level, siblings in the order they started."""
    children: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in found}
    for span in sorted(found, key=lambda s: s.start_time):
        parent = span.parent.span_id if span.parent and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)

    def lines(parent: int | None, depth: int) -> list[str]:
        out = []
        for span in children.get(parent, []):
            out += ["  " * depth + span.name, *lines(span.context.span_id, depth + 1)]
        return out

    return lines(None, 0)


@pytest.mark.parametrize(
    ("call_mode", "first", "then"),
    [
        # one call grades and proposes; the strips are graded anew (a verdict of another shape)
        ("one-call", [], ["  refine: chat m", "  refine: chat m"]),
        # the rewriter writes the next query; the strips' verdicts come from the cache
        ("two-call", ["    rewrite: chat m"], []),
    ],
)
def test_a_trace_reads_as_the_loop(spans, embedder, call_mode, first, then):
    """A run searched, graded, rewritten, refined and answered by an LLM reads, span name by
    span name, as the loop: each iteration numbered, each search named by its lane, each call by
    the stage that made it (grade, rewrite, refine, answer, check)."""
    with ScriptedLLMServer() as server, HybridStore.in_memory(embedder=embedder) as store:
        store.add(CORPUS)
        chat = OpenAIChatClient(server.base_url, "m")
        orch = CorrectiveRAGOrchestrator(
            store,
            LLMEvaluator(chat, batch_size=2, max_workers=1),
            LLMRewriter(chat),
            generator=LLMGenerator(chat),
            top_k=2,
            max_iterations=3,
            call_mode=call_mode,
            refine=True,
        )
        result = orch.run(QUESTION)
    assert 2 == result.iterations
    assert [
        "corrective_rag.run",
        "  iteration 1",
        "    retrieval question",
        "    grade: chat m",
        *first,
        "  iteration 2",
        "    retrieval question",
        "    retrieval rewrite",
        "    retrieval feedback",
        "    grade: chat m",
        *then,
        "  answer: chat m",
        "  check: chat m",
    ] == _tree(_ours(spans))


def test_contents_are_absent_unless_opted_in(spans, embedder):
    """Without capture_content no span carries the question or a query; with it they do."""
    _hybrid_run(embedder)
    text = json.dumps([dict(s.attributes) for s in _ours(spans)])
    assert "jupiter" not in text.lower()
    spans.clear()
    observe.capture_content(True)
    result = _hybrid_run(embedder)
    [run] = _named(_ours(spans), "corrective_rag.run")
    assert QUESTION == run.attributes["corrective_rag.question"]
    queries = {s.attributes["gen_ai.retrieval.query.text"] for s in _op(_ours(spans), "retrieval")}
    feedback = {r.rewrite.feedback for r in result.history if r.rewrite and r.rewrite.feedback}  # type: ignore[attr-defined]
    assert {QUESTION, REWRITE, *feedback} == queries


def test_arun_parents_its_spans_under_the_callers_span(spans, embedder):
    """A run awaited with arun inside an application's span is that span's child."""
    _hybrid_run(embedder, aio=True)
    [request] = [s for s in spans.get_finished_spans() if s.name == "request"]
    [run] = _named(_ours(spans), "corrective_rag.run")
    assert request.context.span_id == run.parent.span_id


def test_an_llm_judged_run_leaves_gen_ai_chat_spans(spans):
    """Each grading call is a CLIENT span `chat {model}` with the GenAI conventions' attributes,
    the server's token counts and finish reason, and no prompt unless opted in."""
    docs = [
        Document("bees", "Honey bees make honey from flower nectar they collect."),
        Document("wasp", "Wasps hunt insects and build paper nests."),
    ]
    with ScriptedLLMServer() as server:
        chat = OpenAIChatClient(server.base_url, "scripted-model")
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(docs),
            LLMEvaluator(chat, batch_size=2, max_workers=1),
            LLMRewriter(chat),
            top_k=2,
            max_iterations=1,
        )
        orch.run("How do honey bees make honey?")
        calls = len(server.requests)
    found = _ours(spans)
    chats = _op(found, "chat")
    assert calls == len(chats) >= 1
    span = chats[0]
    attrs = span.attributes
    assert SpanKind.CLIENT == span.kind
    assert ("chat", "openai", "scripted-model") == (
        attrs["gen_ai.operation.name"],
        attrs["gen_ai.provider.name"],
        attrs["gen_ai.request.model"],
    )
    assert attrs["gen_ai.usage.input_tokens"] > 0
    assert attrs["gen_ai.usage.output_tokens"] > 0
    assert ("stop",) == tuple(attrs["gen_ai.response.finish_reasons"])
    port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
    assert ("127.0.0.1", port) == (attrs["server.address"], attrs["server.port"])
    assert "gen_ai.input.messages" not in attrs and "gen_ai.output.messages" not in attrs
    [iteration] = _op(found, "iteration")
    assert iteration.context.span_id == span.parent.span_id
    assert ("grade: chat scripted-model", "grade") == (span.name, attrs["corrective_rag.stage"])


def test_llm_contents_and_errors_follow_the_opt_in(spans):
    """With contents on, a chat span holds the messages and reply; a failed call is an error
    span naming the exception's type, its message only with contents on."""
    observe.capture_content(True)
    with ScriptedLLMServer() as server:
        chat = OpenAIChatClient(server.base_url, "m")
        chat.complete([{"role": "user", "content": "Say hi"}])
    [span] = _op(_ours(spans), "chat")
    assert ("chat m", None) == (span.name, span.attributes.get("corrective_rag.stage"))
    sent = json.loads(span.attributes["gen_ai.input.messages"])
    assert [{"role": "user", "parts": [{"type": "text", "content": "Say hi"}]}] == sent
    assert "assistant" == json.loads(span.attributes["gen_ai.output.messages"])[0]["role"]
    observe.capture_content(False)
    spans.clear()
    with ScriptedLLMServer() as server:
        server.enqueue(Fault.error(400, '{"error": {"message": "echo: Say hi"}}'))
        with pytest.raises(LLMResponseError):
            OpenAIChatClient(server.base_url, "m").complete([{"role": "user", "content": "Say hi"}])
    [failed] = _op(_ours(spans), "chat")
    assert StatusCode.ERROR == failed.status.status_code
    assert "corrective_rag.errors.LLMResponseError" == failed.attributes["error.type"]
    assert "corrective_rag.errors.LLMResponseError" == failed.status.description
    assert () == tuple(failed.events)
    assert "Say hi" not in json.dumps(dict(failed.attributes))


def test_capture_content_takes_a_bool():
    """capture_content("yes") is a ConfigError, not a silent opt-in."""
    with pytest.raises(ConfigError):
        observe.capture_content("yes")  # type: ignore[arg-type]


def test_a_stage_is_one_of_the_loops():
    """stage("grading") is a ConfigError: a span is named only by one of STAGES."""
    with pytest.raises(ConfigError), tracing.stage("grading"):
        pass  # pragma: no cover - never entered


def test_an_outcome_of_another_shape_costs_attributes_not_the_call(spans):
    """A traced search whose hits are not Hit values returns them unchanged, span and all."""

    class Odd:
        data_source_id = "odd"

        @tracing.traced_retrieval
        def retrieve(self, query: str, *, top_k: int = 10) -> list[str]:
            return ["not", "hits"]

    assert ["not", "hits"] == Odd().retrieve("q", top_k=2)
    [span] = _op(_ours(spans), "retrieval")
    assert "retrieval" == span.name  # no lane, no leg
    assert ("odd", 2) == (
        span.attributes["gen_ai.data_source.id"],
        span.attributes["gen_ai.retrieval.top_k"],
    )
    assert "corrective_rag.hits" not in span.attributes


def test_a_one_leg_search_is_a_retrieval_span_naming_its_leg(spans, embedder):
    """HybridStore.search (one leg, unfused) leaves a retrieval span with the leg and hit ids."""
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add(CORPUS)
        hits = store.search("Io volcanoes", leg="bm25", top_k=2)
    [span] = _op(_ours(spans), "retrieval")
    assert ("retrieval bm25", "bm25") == (span.name, span.attributes["corrective_rag.leg"])
    assert [h.document.id for h in hits] == list(span.attributes["corrective_rag.hit_ids"])
    assert "corrective_rag.lane" not in span.attributes


def test_the_data_source_id_names_the_store_not_a_random_collection(spans, embedder, tmp_path):
    """gen_ai.data_source.id says what the store is, the same for the same store: an unnamed
    in-memory store is chroma:memory (its engine collection has a fresh name each time), a named
    one carries its name, a folder its path and collection, a server its URL without the
    password; a search's span carries it."""
    with HybridStore.in_memory(embedder=embedder) as one, HybridStore.in_memory() as two:
        one.add(CORPUS)
        one.retrieve("Io volcanoes", top_k=1)
        assert one.collection_name != two.collection_name
        assert "chroma:memory" == one.data_source_id == two.data_source_id
    with HybridStore.in_memory(collection="moons", embedder=embedder) as named:
        assert "chroma:memory#moons" == named.data_source_id
    [span] = _op(_ours(spans), "retrieval")
    assert "chroma:memory" == span.attributes["gen_ai.data_source.id"]
    folder = tmp_path / "store"
    for _ in range(2):  # the same folder, opened again: the same id
        with HybridStore.open(folder, embedder=embedder) as store:
            assert f"chroma:{folder.resolve()}#corrective_rag" == store.data_source_id
    with HybridStore.connect("127.0.0.1", 8000, collection="docs") as server:
        assert "chroma:http://127.0.0.1:8000#docs" == server.data_source_id
    pytest.importorskip("qdrant_client")
    with HybridStore.qdrant(":memory:", embedder=embedder) as memory:
        assert "qdrant:memory" == memory.data_source_id
    with HybridStore.qdrant("https://u:S3cret@qdrant.example:6333/", collection="docs") as remote:
        assert "qdrant:https://***@qdrant.example:6333#docs" == remote.data_source_id


def test_queries_searched_together_each_get_a_retrieval_span(spans, embedder):
    """retrieve_many leaves one retrieval span per query, siblings under the caller's span, each
    with its lane, its hit ids and the whole search's duration; a failure marks them all."""
    queries = ["largest moon", "Io volcanoes", "bread"]
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add(CORPUS)
        with trace.get_tracer("app").start_as_current_span("request") as parent:
            found = store.retrieve_many(queries, top_k=2, lanes=["question", "rewrite"])
        with tracing.lane("feedback"), pytest.raises(InputError):
            store.retrieve_many(queries[:2], top_k=2, where={"kind": {"$bad": 1}})
    searches = sorted(_op(_ours(spans), "retrieval"), key=lambda s: s.start_time)
    done, failed = searches[:3], searches[3:]
    assert ["question", "rewrite", None] == [s.attributes.get("corrective_rag.lane") for s in done]
    assert [[h.document.id for h in hits] for hits in found] == [
        list(s.attributes["corrective_rag.hit_ids"]) for s in done
    ]
    assert {parent.get_span_context().span_id} == {s.parent.span_id for s in done}
    assert max(s.start_time for s in done) < min(s.end_time for s in done)  # open together
    assert 2 == len(failed)
    assert {"feedback"} == {s.attributes["corrective_rag.lane"] for s in failed}
    assert {StatusCode.ERROR} == {s.status.status_code for s in failed}


def _attribute_bytes(found: list[ReadableSpan]) -> int:
    return sum(
        len(key.encode()) + sum(len(str(v).encode()) for v in (x if isinstance(x, tuple) else [x]))
        for span in found
        for key, x in span.attributes.items()
    )


def test_a_1_mib_question_leaves_bounded_attributes_recording_the_cut(spans, embedder):
    """With contents on, a run over a 1 MiB question, searched and graded by an LLM, leaves
    spans whose attributes total under 250 kB (9.4 MB before the caps), no text attribute past
    MAX_ATTRIBUTE_CHARS, the cut ones ending in their whole length, and the messages still JSON."""
    observe.capture_content(True)
    question = ("Which moons of Jupiter are the largest? " * 26215)[: 1 << 20]
    with ScriptedLLMServer() as server, HybridStore.in_memory(embedder=embedder) as store:
        store.add(CORPUS)
        chat = OpenAIChatClient(server.base_url, "m")
        orch = CorrectiveRAGOrchestrator(
            store, LLMEvaluator(chat, batch_size=3, max_workers=1), LLMRewriter(chat), top_k=3
        )
        orch.run(question)
    found = _ours(spans)
    assert _attribute_bytes(found) < 250_000
    assert {0} == {s.dropped_attributes for s in found}
    texts = [v for s in found for v in s.attributes.values() if isinstance(v, str)]
    assert max(len(t) for t in texts) <= observe.MAX_ATTRIBUTE_CHARS
    [run] = _named(found, "corrective_rag.run")
    cut = run.attributes["corrective_rag.question"]
    assert (observe.MAX_ATTRIBUTE_CHARS, question[:100]) == (len(cut), cut[:100])
    assert cut.endswith("…[cut: 1048576 chars]")
    [search, *_] = _op(found, "retrieval")
    assert search.attributes["gen_ai.retrieval.query.text"].endswith("…[cut: 1048576 chars]")
    chats = _op(found, "chat")
    assert chats
    for span in chats:
        sent = json.loads(span.attributes["gen_ai.input.messages"])  # still JSON
        assert ["system", "user"] == [m["role"] for m in sent]
        assert "…[cut: " in sent[1]["parts"][0]["content"]
        assert "…[cut: " not in sent[0]["parts"][0]["content"]  # the short one stays whole


def test_long_lists_and_error_messages_are_cut_too(spans):
    """A search returning 100 hits records 64 ids and `hit_ids_original_length` 100; a failure
    whose message is 1 MiB records a status and exception event within the text bound."""
    observe.capture_content(True)
    hits = [Hit(Document(f"d{i}", "text"), 1.0 / (i + 1), i + 1) for i in range(100)]

    class Many:
        data_source_id = "many"

        @tracing.traced_retrieval
        def retrieve(self, query: str, *, top_k: int = 10) -> list[Hit]:
            if query == "fail":
                raise InputError("x" * (1 << 20))
            return hits

    Many().retrieve("q", top_k=100)
    with pytest.raises(InputError):
        Many().retrieve("fail")
    done, failed = _op(_ours(spans), "retrieval")
    assert 0 == done.dropped_attributes  # under the SDK's 128 attributes a span
    assert [f"d{i}" for i in range(64)] == list(done.attributes["corrective_rag.hit_ids"])
    assert 100 == done.attributes["corrective_rag.hit_ids_original_length"]
    assert len(failed.status.description) <= observe.MAX_ATTRIBUTE_CHARS
    assert failed.status.description.endswith("…[cut: 1048576 chars]")
    [event] = failed.events
    assert all(len(str(v)) <= observe.MAX_ATTRIBUTE_CHARS for v in event.attributes.values())
    assert event.attributes["exception.message"] == failed.status.description


def test_run_and_iteration_spans_are_openinference_chains_with_their_outputs(spans, embedder):
    """The run span is a CHAIN with operation invoke_workflow and its outcome as JSON output;
    each iteration a CHAIN with operation iteration and its action and ids; each search a
    RETRIEVER; no input value without contents."""
    result = _hybrid_run(embedder)
    found = _ours(spans)
    [run] = _named(found, "corrective_rag.run")
    assert ("CHAIN", "invoke_workflow", "application/json") == (
        run.attributes["openinference.span.kind"],
        run.attributes["gen_ai.operation.name"],
        run.attributes["output.mime_type"],
    )
    assert {"stop_reason": "enough_relevant", "kept_ids": list(result.kept_ids)} == json.loads(
        run.attributes["output.value"]
    )
    iterations = sorted(_op(found, "iteration"), key=lambda s: s.start_time)
    for span, record in zip(iterations, result.history, strict=True):
        assert ("CHAIN", "iteration") == (
            span.attributes["openinference.span.kind"],
            span.attributes["gen_ai.operation.name"],
        )
        out = json.loads(span.attributes["output.value"])
        assert (record.action.value, list(record.kept_ids), list(record.dropped_ids)) == (
            out["action"],
            out["kept_ids"],
            out["dropped_ids"],
        )
    assert {"RETRIEVER"} == {
        s.attributes["openinference.span.kind"] for s in _op(found, "retrieval")
    }
    assert not [s for s in found if "input.value" in s.attributes]


def test_a_search_span_carries_its_documents_ids_and_scores_as_both_conventions(spans, embedder):
    """A search span names its top_k gen_ai.retrieval.top_k (not the sampling parameter
    gen_ai.request.top_k) and carries each hit, in rank order, as gen_ai.retrieval.documents
    JSON and as OpenInference's retrieval.documents.{i}.document.id/score; texts only with
    contents on, then with the query as input.value."""
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add(CORPUS)
        hits = store.retrieve("Io volcanoes", top_k=3)
        observe.capture_content(True)
        store.retrieve("Io volcanoes", top_k=3)
    plain, full = _op(_ours(spans), "retrieval")
    attrs = plain.attributes
    assert (3, "RETRIEVER") == (attrs["gen_ai.retrieval.top_k"], attrs["openinference.span.kind"])
    assert "gen_ai.request.top_k" not in attrs
    expected = [{"id": h.document.id, "score": h.score} for h in hits]
    assert expected == json.loads(attrs["gen_ai.retrieval.documents"])
    assert expected == [
        {
            "id": attrs[f"retrieval.documents.{i}.document.id"],
            "score": attrs[f"retrieval.documents.{i}.document.score"],
        }
        for i in range(len(hits))
    ]
    assert not [k for k in attrs if k.endswith(".document.content") or k.startswith("input.")]
    assert [h.document.text for h in hits] == [
        full.attributes[f"retrieval.documents.{i}.document.content"] for i in range(len(hits))
    ]
    assert ("Io volcanoes", "text/plain") == (
        full.attributes["input.value"],
        full.attributes["input.mime_type"],
    )


@pytest.mark.parametrize("stream", [True, False])
def test_chat_spans_are_openinference_llm_spans_with_tokens_and_the_response_id(spans, stream):
    """A chat span (streamed or not) is an LLM span with the model, prompt/completion/total
    tokens and the server's completion id as gen_ai.response.id; with contents on, the messages
    as input.value JSON and llm.input_messages, the reply as output.value."""
    observe.capture_content(True)
    with ScriptedLLMServer() as server:
        reply = OpenAIChatClient(server.base_url, "m", stream=stream).complete(
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"}]
        )
    [span] = _op(_ours(spans), "chat")
    attrs = span.attributes
    usage = reply.usage
    assert ("LLM", reply.model, "openai") == (
        attrs["openinference.span.kind"],
        attrs["llm.model_name"],
        attrs["llm.provider"],
    )
    assert (usage.prompt_tokens, usage.completion_tokens) == (
        attrs["llm.token_count.prompt"],
        attrs["llm.token_count.completion"],
    )
    assert usage.prompt_tokens + usage.completion_tokens == attrs["llm.token_count.total"]
    assert attrs["gen_ai.response.id"].startswith("chatcmpl-")
    assert reply.response_id == attrs["gen_ai.response.id"]
    sent = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"}]
    assert (sent, "application/json") == (
        json.loads(attrs["input.value"]),
        attrs["input.mime_type"],
    )
    assert ["system", "Be brief.", "user", "Say hi"] == [
        attrs[f"llm.input_messages.{i}.message.{field}"]
        for i in range(2)
        for field in ("role", "content")
    ]
    assert (reply.text, "assistant", reply.text) == (
        attrs["output.value"],
        attrs["llm.output_messages.0.message.role"],
        attrs["llm.output_messages.0.message.content"],
    )
