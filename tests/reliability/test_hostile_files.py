"""Every reader of a file the package did not just write meets the same hostile set.

Issue 48 items 3 and 4: a device (``/dev/zero`` reads for ever and claims size 0), a FIFO (a
plain ``open`` blocks until a writer comes), a line of 200 MB (read whole before a length
check), bytes that are not UTF-8 (``UnicodeDecodeError``) and 500,000 ``[`` (``RecursionError``).
Each reader in :data:`READERS` must answer each of them with one line naming the file (an error
of the package's tree, or for a reader whose policy is to recover, the warning it logs), with
bounded memory (traced by ``tracemalloc``), and without blocking: the FIFO is refused unopened.

To add a reader, append a :class:`Reader`: its
file name, and a function reading a file of that name in a folder.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from corrective_rag.errors import CorrectiveRAGError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev/zero")

MB = 1 << 20
MOST_MEMORY = 200 * MB  # a reader's peak of traced allocations on any hostile file


def _device(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _long_line(path: Path) -> None:
    """A line of 200 MB (NUL bytes) and its newline, written sparse: it costs no disk."""
    with path.open("wb") as fh:
        fh.seek(200 * MB)
        fh.write(b"\n")


def _not_utf8(path: Path) -> None:
    path.write_bytes(b'{"id": "q\xff\xfe", "text": "caf\xe9"}\n')


def _deep(path: Path) -> None:
    path.write_bytes(b"[" * 500_000 + b"\n")


HOSTILE: dict[str, Callable[[Path], None]] = {
    "device": _device,
    "fifo": _fifo,
    "200mb-line": _long_line,
    "not-utf8": _not_utf8,
    "deep-nesting": _deep,
}


@dataclass(frozen=True)
class Reader:
    """One reader of untrusted files.

    Attributes:
        name: what it reads.
        file: the hostile file's name in the folder (a reader may look for a fixed name).
        read: reads the file ``folder / file``; returns the one line it said (the message of
            the error it raised, or the warning it logged), or ``None`` if it said nothing.
        accepts: hostile cases that are plain data for this reader (500,000 ``[`` in a text
            file is a text to index).
    """

    name: str
    file: str
    read: Callable[[Path], str | None]
    accepts: frozenset[str] = frozenset()


def _raised(call: Callable[[], object]) -> str | None:
    """The message of the package error ``call`` raises, or None when it raises none."""
    try:
        call()
    except CorrectiveRAGError as exc:
        return str(exc)
    return None


def _raised_or_warned(call: Callable[[], object]) -> str | None:
    """As :func:`_raised`, or the reason of the one warning ``call`` logged instead."""
    with capture_logs() as logs:
        said = _raised(call)
    warned = [str(e.get("reason", e["event"])) for e in logs if e["log_level"] == "warning"]
    return said if said is not None else (warned[0] if len(warned) == 1 else None)


def _queries(path: Path) -> str | None:
    from corrective_rag.runs.execution.queries import read_queries

    return _raised(lambda: read_queries(path))


def _results(path: Path) -> str | None:
    from corrective_rag.runs.records.results import read_results

    return _raised(lambda: read_results(path))


def _history(path: Path) -> str | None:
    from corrective_rag.runs.records.history import HistoryStore

    return _raised(lambda: list(HistoryStore(path)))


def _qrels(path: Path) -> str | None:
    from corrective_rag.runs.reports.html import read_qrels

    return _raised(lambda: read_qrels(path))


def _documents(path: Path) -> str | None:
    from corrective_rag.store.loaders import iter_documents

    return _raised(lambda: list(iter_documents(path)))


def _bm25_snapshot(path: Path) -> str | None:
    from corrective_rag.store.bm25 import BM25Index

    return _raised(lambda: BM25Index.load(str(path)))


def _bm25_log(path: Path) -> str | None:
    """The log beside a good snapshot: damage after a good line is cut with a warning, a log
    unreadable from its first line is refused (the store rebuilds its BM25 side)."""
    from corrective_rag.store.bm25 import BM25Index
    from corrective_rag.store.persist import SavedBM25, bm25_path

    folder = path.parent
    index = BM25Index()
    index.put_tokens({"a": ["alpha"]})
    index.save(bm25_path(str(folder), "col"), "s1")
    return _raised_or_warned(lambda: SavedBM25(str(folder), "col").load(None, writable=False))


def _export_record(path: Path) -> str | None:
    from corrective_rag.models.onnx_export import read_record

    return _raised(lambda: read_record(path.with_name(path.name.removesuffix(".json"))))


def _model_config(path: Path) -> str | None:
    from corrective_rag.models.source import model_config

    return _raised(lambda: model_config(str(path.parent), path.name))


def _judge_profiles(path: Path) -> str | None:
    from corrective_rag.evaluate.profile_file import read_entries

    return _raised(lambda: read_entries(path))


def _judge_pairs(path: Path) -> str | None:
    from corrective_rag.evaluate.check.pairs import read_pairs

    return _raised(lambda: read_pairs(str(path)))


def _model_folder(path: Path) -> str | None:
    """A model folder holding the shipped tokenizer files but for the hostile one."""
    import shutil

    from corrective_rag.models.source import default_model_path
    from corrective_rag.models.tokenizer import load_tokenizer

    for name in ("tokenizer.json", "sentence_bert_config.json"):
        if name != path.name:
            shutil.copy(Path(default_model_path()) / name, path.parent / name)
    return _raised(lambda: load_tokenizer(str(path.parent)))


READERS: list[Reader] = [
    Reader("queries (batch)", "queries.jsonl", _queries),
    Reader("results (history, resume)", "results.jsonl", _results),
    Reader("run history (HistoryStore)", "history.jsonl", _history),
    Reader("qrels (history report --qrels)", "qrels.tsv", _qrels),
    Reader("corpus records (index)", "corpus.jsonl", _documents),
    Reader("text file (index)", "notes.txt", _documents, frozenset({"deep-nesting"})),
    Reader("BM25 snapshot (store)", "bm25-col.json", _bm25_snapshot),
    Reader("BM25 log (store)", "bm25-col.log", _bm25_log),
    Reader("ONNX export record (cache)", "model.onnx.json", _export_record),
    Reader("model config.json", "config.json", _model_config),
    Reader("model tokenizer.json", "tokenizer.json", _model_folder),
    Reader("model sentence_bert_config.json", "sentence_bert_config.json", _model_folder),
    Reader("judge profiles (run, judge-check)", "judge-profiles.json", _judge_profiles),
    Reader("labelled pairs (judge-check --pairs)", "pairs.jsonl", _judge_pairs),
]


@contextlib.contextmanager
def _released(path: Path, fifo: bool) -> Iterator[None]:
    """For a FIFO, a writer that releases a reader who opened it blocking (it then reads an
    empty file, and the test fails on what it says), so that no reader can hang the suite."""
    if not fifo:
        yield
        return

    def write_nothing() -> None:
        os.close(os.open(path, os.O_WRONLY))  # waits for a reader to open the other end

    writer = threading.Thread(target=write_nothing, daemon=True)
    writer.start()
    try:
        yield
    finally:
        own = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # frees the writer if none came
        writer.join()
        os.close(own)


@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
def test_every_reader_says_one_line_naming_the_file(reader: Reader, case: str, tmp_path) -> None:
    """The reader refuses the hostile file with one line naming it, its memory bounded and
    without blocking, or (where the case is plain data to it) reads it."""
    path = tmp_path / reader.file
    HOSTILE[case](path)
    tracemalloc.start()
    try:
        with _released(path, case == "fifo"):
            said = reader.read(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MOST_MEMORY, f"{peak / MB:.0f} MB traced"
    if case in reader.accepts:
        assert said is None, said
        return
    assert said is not None, "read as if it were a good file"
    assert "\n" not in said
    # named as given, or as where its link leads (a corpus path is read as its canonical path)
    assert reader.file in said or os.path.realpath(path) in said, said


def test_a_history_store_refuses_to_append_to_a_fifo_or_a_device(tmp_path) -> None:
    """Appending reads the file's tail first: a FIFO or a device in its place is refused, never
    read (a FIFO opened for appending would wait for ever, /dev/zero never end)."""
    from corrective_rag import CorrectiveRAGOrchestrator
    from corrective_rag.errors import InputError
    from corrective_rag.runs.records.history import HistoryStore
    from corrective_rag.testing.fakes import ListRetriever, ScriptedEvaluator, ScriptedRewriter
    from corrective_rag.types import Document

    loop = CorrectiveRAGOrchestrator(
        ListRetriever([Document("a", "alpha")]), ScriptedEvaluator({}), ScriptedRewriter([])
    )
    result = loop.run("alpha")
    for case in ("fifo", "device"):
        path = tmp_path / f"{case}.jsonl"
        HOSTILE[case](path)
        with pytest.raises(InputError, match="is not a regular file"):
            HistoryStore(path).append(result)
