"""One traced run, exported over OTLP/HTTP to Arize Phoenix, Langfuse or a collector, or measured.

The run is offline and small: six documents in an in-memory hybrid store (the default embedding
model, from the local cache), graded and rewritten by the real ``LLMEvaluator`` / ``LLMRewriter``
through the HTTP client against the scripted model server on 127.0.0.1. It leaves a run span
(OpenInference CHAIN), iteration spans (CHAIN), retrieval spans (RETRIEVER, with documents and
scores) and chat spans (LLM, with tokens and ``gen_ai.response.id``).

    # Phoenix (``phoenix serve``) takes OTLP/HTTP on its own port, 6006:
    python benchmarks/phoenix_trace.py http://127.0.0.1:6006/v1/traces --content
    # a collector, Jaeger or Langfuse's OTLP endpoint (headers as ``KEY=VALUE``):
    python benchmarks/phoenix_trace.py http://127.0.0.1:4318/v1/traces --header "Authorization=..."
    # no export: count the spans' attribute bytes (a 1 MiB question, contents captured)
    python benchmarks/phoenix_trace.py --memory --content --question-chars 1048576
    # 4 small runs and a 1 MiB question in one OTLP/gRPC batch (Phoenix's gRPC port is 4317);
    # --count-at asks Phoenix's REST API how many of the spans sent arrived
    python benchmarks/phoenix_trace.py 127.0.0.1:4317 --grpc --small-runs 4 --content \
        --question-chars 1048576 --count-at http://127.0.0.1:6006

Prints one JSON line: spans by name, the run's trace id, and with ``--memory`` the attributes'
size (the UTF-8 length of each key and value, a list's items summed) and the largest attribute.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanProcessor,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from corrective_rag import observe
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.testing import ScriptedLLMServer
from corrective_rag.types import Document

QUESTION = "Which moons of Jupiter are the largest?"
CORPUS = [
    Document("ganymede", "Ganymede, a moon of Jupiter, is the largest moon in the Solar System."),
    Document("callisto", "Callisto is the second largest moon of Jupiter, heavily cratered."),
    Document("io", "Io, innermost of the Galilean moons, is covered in active volcanoes."),
    Document("titan", "Titan is the largest moon of Saturn, with a thick hazy atmosphere."),
    Document("bread", "Sourdough bread rises thanks to wild yeast."),
    Document("river", "The Nile flows north into the Mediterranean Sea."),
]


def attribute_bytes(span: ReadableSpan) -> int:
    """The UTF-8 size of a span's attribute keys and values (a list's items summed)."""
    total = 0
    for key, value in (span.attributes or {}).items():
        items = value if isinstance(value, (list, tuple)) else [value]
        total += len(key.encode()) + sum(len(str(v).encode()) for v in items)
    return total


def largest_attribute(spans: list[ReadableSpan]) -> tuple[str, int]:
    """The span and attribute name holding the most bytes, and how many."""
    best = ("", 0)
    for span in spans:
        for key, value in (span.attributes or {}).items():
            items = value if isinstance(value, (list, tuple)) else [value]
            size = sum(len(str(v).encode()) for v in items)
            if size > best[1]:
                best = (f"{span.name}: {key}", size)
    return best


def arrived(phoenix: str, spans: list[ReadableSpan]) -> int:
    """How many of ``spans`` Phoenix at ``phoenix`` holds (its REST API, default project)."""
    sent = {format(s.context.span_id, "016x") for s in spans}
    url = f"{phoenix.rstrip('/')}/v1/projects/default/spans?limit=1000"
    found, cursor = 0, ""
    while True:
        with urllib.request.urlopen(url + cursor, timeout=30) as response:
            page = json.load(response)
        found += sum(1 for s in page["data"] if s["context"]["span_id"] in sent)
        if not page.get("next_cursor"):
            return found
        cursor = f"&cursor={page['next_cursor']}"


# What each export needs: the package to install, and the extra that installs it.
EXPORTERS = {
    "grpc": (
        "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
        "opentelemetry-exporter-otlp-proto-grpc (installed with chromadb)",
    ),
    "http": (
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "opentelemetry-exporter-otlp-proto-http with its dependencies "
        "(pip install 'corrective_rag[bench]')",
    ),
}


def otlp_exporter(args: argparse.Namespace) -> SpanExporter:
    """The OTLP exporter for ``args.url``, imported only now: ``--memory`` needs none.

    Raises SystemExit with one line naming what to install when the exporter, or a module it
    imports (``opentelemetry-exporter-http-transport`` for the HTTP one since 1.45), is missing,
    before any run is made.
    """
    module, install = EXPORTERS["grpc" if args.grpc else "http"]
    try:
        exporter_class = importlib.import_module(module).OTLPSpanExporter
    except ImportError as exc:
        missing = f"{exc}"
        if (exc.name or "").startswith("opentelemetry.exporter.http"):
            missing += " (from opentelemetry-exporter-http-transport)"
        raise SystemExit(f"phoenix_trace: exporting needs {install}: {missing}") from None
    if args.grpc:
        return cast(SpanExporter, exporter_class(endpoint=args.url, insecure=True))
    headers = dict(h.split("=", 1) for h in args.header)
    return cast(SpanExporter, exporter_class(endpoint=args.url, headers=headers or None))


def one_run(question: str, embedder: SentenceTransformerEmbedder) -> Any:
    """The traced run: a hybrid store, the LLM judge and rewriter against the scripted server."""
    with ScriptedLLMServer() as server, HybridStore.in_memory(embedder=embedder) as store:
        store.add(CORPUS)
        chat = OpenAIChatClient(server.base_url, "scripted-model")
        orch = CorrectiveRAGOrchestrator(
            store,
            LLMEvaluator(chat, batch_size=3, max_workers=1),
            LLMRewriter(chat),
            top_k=3,
            max_iterations=2,
        )
        return orch.run(question)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?", help="OTLP/HTTP traces endpoint, e.g. .../v1/traces")
    parser.add_argument("--memory", action="store_true", help="export to memory and measure")
    parser.add_argument("--content", action="store_true", help="capture contents on spans")
    parser.add_argument("--question-chars", type=int, default=0, help="pad the question to N")
    parser.add_argument("--header", action="append", default=[], help="KEY=VALUE for the export")
    parser.add_argument("--service", default="corrective-rag-demo", help="service.name")
    parser.add_argument("--grpc", action="store_true", help="OTLP/gRPC to HOST:PORT, one batch")
    parser.add_argument("--small-runs", type=int, default=0, help="plain runs made first")
    parser.add_argument("--count-at", help="Phoenix's URL: count the spans that arrived")
    args = parser.parse_args(argv)
    if not args.memory and not args.url:
        parser.error("give a collector URL or --memory")

    memory = InMemorySpanExporter()
    exporter = memory if args.memory else otlp_exporter(args)
    provider = TracerProvider(resource=Resource.create({"service.name": args.service}))
    # gRPC: every span in one batch, sent at the end, as a busy service's batches hold many runs
    processor: SpanProcessor = (
        BatchSpanProcessor(exporter, schedule_delay_millis=600_000, max_export_batch_size=512)
        if args.grpc
        else SimpleSpanProcessor(exporter)
    )
    provider.add_span_processor(processor)
    if not args.memory:
        provider.add_span_processor(SimpleSpanProcessor(memory))  # to count what was sent
    trace.set_tracer_provider(provider)
    observe.capture_content(args.content)

    question = QUESTION
    if args.question_chars > len(question):
        question = (question + " ") * (args.question_chars // (len(question) + 1) + 1)
        question = question[: args.question_chars]
    embedder = SentenceTransformerEmbedder()
    for _ in range(args.small_runs):
        one_run(QUESTION, embedder)
    result = one_run(question, embedder)
    provider.shutdown()

    spans = list(memory.get_finished_spans())
    run = [s for s in spans if s.name == "corrective_rag.run"][-1]
    report: dict[str, Any] = {
        "question_chars": len(question),
        "content": args.content,
        "stop_reason": result.stop_reason.value,
        "trace_id": format(run.context.trace_id, "032x"),
        "spans": dict(Counter(s.name for s in spans)),
    }
    if args.memory:
        where, size = largest_attribute(spans)
        report["attribute_bytes"] = sum(attribute_bytes(s) for s in spans)
        report["largest_attribute"] = {"where": where, "bytes": size}
    else:
        report["exported_to"] = args.url
        report["spans_sent"] = len(spans)
    if args.count_at:  # Phoenix stores what it received a moment later: ask for up to 20 s
        deadline = time.monotonic() + 20
        while (found := arrived(args.count_at, spans)) < len(spans) and time.monotonic() < deadline:
            time.sleep(1)
        report["spans_arrived"] = found
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
