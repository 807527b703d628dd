"""Store faults: a chroma server gone mid-batch, and a process killed mid-index."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import chromadb
import pytest
from faults_support import ChromaServer, HashEmbedder
from structlog.testing import capture_logs

from corrective_rag.evaluate.local import LocalEvaluator
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.local import LocalRewriter
from corrective_rag.runs.execution.batch import run_batch
from corrective_rag.runs.execution.queries import Query
from corrective_rag.runs.records.results import latest_records, read_results
from corrective_rag.store.backend import DEFAULT_COLLECTION
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.store.persist import SavedBM25
from corrective_rag.types import Document

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TOPICS = ["volcano lava", "glacier ice", "violin strings", "tide moon", "honey bees", "bread yeast"]


def _corpus() -> list[Document]:
    return [
        Document(f"d{i}", f"Note {i} on {TOPICS[i % len(TOPICS)]} and item{i} details.")
        for i in range(60)
    ]


def _wait_for_lines(path: Path, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.005)
    raise AssertionError(f"{path} never reached {n} lines")


def test_chroma_outage_mid_batch_becomes_error_lines_and_a_resume_completes(tmp_path):
    """Queries made while the chroma server is down end as StoreError lines, the batch goes on
    to the end, and a resume after the restart completes them all, each id once."""
    server = ChromaServer(tmp_path / "chroma")
    server.start()
    try:
        embedder = HashEmbedder()
        store = HybridStore.connect("127.0.0.1", server.port, embedder=embedder)
        store.add(_corpus())
        orch = CorrectiveRAGOrchestrator(
            store,
            LocalEvaluator(embedder, idf=store.idf),
            LocalRewriter(idf=store.idf),
            max_iterations=2,
            top_k=3,
        )
        queries = [Query(f"q{i:03d}", f"what about {TOPICS[i % 6]} item{i}?") for i in range(150)]
        out = tmp_path / "results.jsonl"

        def outage() -> None:
            _wait_for_lines(out, 20)
            server.stop()

        killer = threading.Thread(target=outage)
        killer.start()
        first = run_batch(queries, orch.run, out_path=out, concurrency=4, progress=False)
        killer.join()
        lines = read_results(out)
        assert sorted(q.id for q in queries) == sorted(r.id for r in lines)  # each id once
        errors = Counter(r.error["type"] for r in lines if not r.ok)
        assert first.failures == sum(errors.values()) > 0
        assert {"StoreError"} == set(errors)  # never a raw httpx or chromadb exception
        assert first.ok >= 20

        server.start()  # same folder, same port: the store's client reconnects
        second = run_batch(queries, orch.run, out_path=out, concurrency=4, progress=False)
        assert (150, 0, first.ok) == (second.ok, second.failures, second.skipped)
        final = latest_records(read_results(out))
        assert sorted(q.id for q in queries) == sorted(r.id for r in final)
        assert all(r.ok for r in final)
    finally:
        server.stop()


CHILD = textwrap.dedent(
    """
    import sys
    from corrective_rag.store.hybrid import HybridStore
    from corrective_rag.types import Document
    from faults_support import HashEmbedder
    store = HybridStore.open(sys.argv[1], embedder=HashEmbedder())
    for b in range(10_000):
        store.add([Document(f"b{b}-{i}", f"record b{b}x{i} of batch {b}") for i in range(50)])
        print(b, flush=True)
    """
)


def _chroma_side(path: Path) -> tuple[set[str], str | None]:
    """The ids and version stamp chroma holds, read with chromadb itself."""
    client = chromadb.PersistentClient(path=str(path))
    collection = client.get_collection(DEFAULT_COLLECTION, embedding_function=None)
    return set(collection.get(include=[])["ids"]), (collection.metadata or {}).get("crag_stamp")


def _kill_mid_index(path: Path, after: int, delay: float) -> int:
    """Start the indexing child, SIGKILL it ``delay`` s after its ``after``-th commit."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]))
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    committed = 0  # the child's stdout also carries structlog's default output: count numbers
    while committed < after:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"child ended early (exit {proc.wait()})")
        committed += line.strip().isdigit()
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    committed += sum(1 for line in proc.stdout if line.strip().isdigit())
    assert -signal.SIGKILL == proc.wait(timeout=30)
    return committed


def test_kill_mid_index_reopens_with_both_sides_in_step(tmp_path):
    """After SIGKILL mid-index, reopening keeps every committed batch, holds only whole
    batches, repairs (and logs) a BM25 side that disagrees with chroma, BM25 finds every
    document and the dense side holds it."""
    rng = random.Random(7)
    mismatches = 0
    for trial, after in enumerate((2, 5, 9, 14)):
        path = tmp_path / f"store{trial}"
        committed = _kill_mid_index(path, after, rng.uniform(0.0, 0.05))
        dense_ids, dense_stamp = _chroma_side(path)
        # the BM25 side as the store will load it: snapshot plus log, up to chroma's stamp
        saved, saved_stamp = SavedBM25(str(path), DEFAULT_COLLECTION).load(
            dense_stamp, writable=False
        )
        mismatches += set(saved.ids()) != dense_ids
        disagree = set(saved.ids()) != dense_ids or saved_stamp != dense_stamp
        with capture_logs() as logs, HybridStore.open(path, embedder=HashEmbedder()) as store:
            ids = set(store.ids())
            assert dense_ids == ids
            batches = Counter(i.split("-")[0] for i in ids)
            assert all(50 == n for n in batches.values())  # a write is all or nothing
            assert {f"b{b}" for b in range(committed)} <= set(batches)
            assert len(batches) <= committed + 1  # at most the batch in flight besides
            repaired = [e for e in logs if e["event"] == "bm25_repaired"]
            assert disagree == bool(repaired)
            for doc_id in rng.sample(sorted(ids), 10):
                b, i = doc_id[1:].split("-")
                text = f"record b{b}x{i} of batch {b}"
                assert doc_id == store.search(text, leg="bm25", top_k=1)[0].document.id
                # The dense side holds the record with its text. (Searching for it is no check:
                # hashed vectors of one batch are near-duplicates and chroma's HNSW search is
                # approximate among them; it misses ~2% of them even without any kill.)
                assert [text] == [d.text for d in store.get([doc_id])]
    print(f"{mismatches} of 4 kills left the sides holding different ids before reopen")
