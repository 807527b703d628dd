"""``corrective-rag demo``: the whole loop, offline, over the Python standard library's own docs.

The corpus is the docstrings of a fixed list of stdlib modules (the module and its public
functions and classes), cut into chunks of about 100 words. It is on every machine with Python,
needs no download, and is real prose about real questions. The questions are phrased the way a
person asks, not in the docs' own words, so the first retrieval is imperfect and the rewriter's
feedback has something to fix.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import IO, Any

from corrective_rag.observe.logs import get_logger
from corrective_rag.types import Document

__all__ = ["DEMO_QUESTIONS", "STDLIB_MODULES", "run_demo", "stdlib_documents"]

log: Any = get_logger(__name__)

CHUNK_WORDS = 100  # ~130 tokens: short enough to judge, long enough to hold one idea

STDLIB_MODULES = (
    "abc", "argparse", "array", "ast", "asyncio", "base64", "bisect", "bz2", "calendar", "cmath",
    "codecs", "collections", "colorsys", "concurrent.futures", "configparser", "contextlib",
    "copy", "csv", "dataclasses", "datetime", "decimal", "difflib", "enum", "filecmp",
    "fnmatch", "fractions", "functools", "getpass", "gettext", "glob", "gzip", "hashlib",
    "heapq", "hmac", "html", "http.client", "imaplib", "inspect", "io", "ipaddress",
    "itertools", "json", "logging", "lzma", "math", "mimetypes", "multiprocessing", "operator",
    "os", "os.path", "pathlib", "pickle", "pprint", "queue", "random", "re", "sched",
    "secrets", "select", "shelve", "shlex", "shutil", "signal", "smtplib", "socket", "sqlite3",
    "statistics", "string", "struct", "subprocess", "tarfile", "tempfile", "textwrap",
    "threading", "time", "timeit", "tokenize", "traceback", "types", "typing", "unicodedata",
    "unittest", "urllib.parse", "urllib.request", "uuid", "warnings", "weakref", "zipfile",
    "zlib",
)  # fmt: skip

# Three ways a run goes: one answered in iteration 1 (the next iteration keeps nothing new, so
# the run stops there), one whose second iteration still keeps new documents, one that keeps too
# few and explores until the cap ends the run. With the offline judge the first two stop as
# kept_unconfident: enough kept, none at confidence 0.7.
DEMO_QUESTIONS = (
    "How do I run a shell command and capture its output?",
    "How do I create a temporary file?",
    "How do I measure the execution time of a small code snippet?",
)


def _chunks(text: str, words: int = CHUNK_WORDS) -> Iterator[str]:
    """Paragraph-aware chunks of about ``words`` words (a long paragraph is split by words)."""
    current: list[str] = []
    for para in text.split("\n\n"):
        tokens = para.split()
        while tokens:
            room = words - len(current)
            current += tokens[:room]
            tokens = tokens[room:]
            if len(current) >= words:
                yield " ".join(current)
                current = []
    if len(current) >= 8:  # a trailing scrap of a few words says nothing on its own
        yield " ".join(current)


def _members(module: Any) -> Iterator[tuple[str, str]]:
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    for name in sorted(set(names)):
        obj = getattr(module, name, None)
        if obj is None or getattr(obj, "__module__", None) not in (module.__name__, None):
            continue  # skip what the module merely re-exports: it is indexed where it lives
        if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj):
            doc = inspect.getdoc(obj)
            if doc:
                yield f"{module.__name__}.{name}", doc


def stdlib_documents(modules: Sequence[str] = STDLIB_MODULES) -> list[Document]:
    """Chunked docstrings of ``modules``; modules missing on this platform are skipped."""
    docs: list[Document] = []
    for mod_name in modules:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(mod_name)
        except ImportError:
            continue
        entries = [(mod_name, inspect.getdoc(module) or ""), *_members(module)]
        for qualname, doc in entries:
            for k, chunk in enumerate(_chunks(doc)):
                text = f"{qualname}: {chunk}"
                docs.append(
                    Document(f"{qualname}#{k}", text, {"module": mod_name, "object": qualname})
                )
    return docs


def run_demo(*, modules: int | None = None, out: IO[str] | None = None) -> list[Any]:
    """Index the stdlib corpus in memory and run :data:`DEMO_QUESTIONS` through the loop.

    Args:
        modules: index only the first ``modules`` modules of :data:`STDLIB_MODULES`.
        out: where the tables go (stdout by default).

    Returns:
        The run results, one per question.
    """
    from corrective_rag.evaluate.local import LocalEvaluator
    from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
    from corrective_rag.rewrite.local import LocalRewriter
    from corrective_rag.runs.reports.report import render_kept, render_run
    from corrective_rag.store.hybrid import HybridStore

    stream = out or sys.stdout
    chosen = STDLIB_MODULES[:modules] if modules else STDLIB_MODULES
    started = time.perf_counter()
    docs = stdlib_documents(chosen)
    stream.write(f"indexing {len(docs)} chunks of stdlib docstrings from {len(chosen)} modules\n")
    stream.flush()
    with HybridStore.in_memory() as store:
        store.add(docs)
        stream.write(f"indexed in {time.perf_counter() - started:.1f} s\n\n")
        orch = CorrectiveRAGOrchestrator(
            store,
            LocalEvaluator(store.embedder, idf=store.idf),
            LocalRewriter(idf=store.idf),
            max_iterations=3,
            top_k=5,
            min_relevant=3,
        )
        results = []
        for question in DEMO_QUESTIONS:
            result = orch.run(question)
            results.append(result)
            stream.write(render_run(result) + "\n\n" + render_kept(result, text_width=70) + "\n\n")
            stream.flush()
    stream.write(f"demo finished in {time.perf_counter() - started:.1f} s\n")
    return results
