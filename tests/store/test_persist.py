"""The BM25 side on disk: commits append in proportion to the batch, compaction, crash recovery."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest
from structlog.testing import capture_logs

from corrective_rag.errors import StoreError
from corrective_rag.store import persist
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.store.persist import SavedBM25
from corrective_rag.types import Document


class OneHotEmbedder:
    """A cheap deterministic embedder: the text's length picks one of 16 axes."""

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, len(text) % 16] = 1.0
        return out


def _batch(b: int, n: int = 50) -> list[Document]:
    return [Document(f"b{b}-{i}", f"record {i} of batch {b} word{b}x{i}") for i in range(n)]


def _open(path) -> HybridStore:
    return HybridStore.open(path, embedder=OneHotEmbedder())


def test_a_commit_appends_its_batch_and_leaves_the_snapshot_alone(tmp_path) -> None:
    """Each write appends about its own batch's bytes to the log; the snapshot is not rewritten."""
    with _open(tmp_path / "s") as store:
        store.warm_up()
        saved = SavedBM25(str(tmp_path / "s"), "corrective_rag")
        snapshot = os.stat(saved.snapshot)
        growth = []
        for b in range(12):
            before = saved.log_size()
            store.add(_batch(b))
            growth.append(saved.log_size() - before)
        store.delete([f"b0-{i}" for i in range(50)])
        after = os.stat(saved.snapshot)
        assert (snapshot.st_ino, snapshot.st_size) == (after.st_ino, after.st_size)
        assert max(growth) < 1.2 * min(growth)  # the 12th write costs what the 1st did
        before_close = store.search("word11x7", leg="bm25", top_k=3)
    with _open(tmp_path / "s") as store:
        assert 550 == store.count()
        assert before_close == store.search("word11x7", leg="bm25", top_k=3)


def test_log_larger_than_snapshot_is_compacted(tmp_path, monkeypatch) -> None:
    """Once the log outgrows the snapshot, a commit writes a snapshot and empties the log."""
    monkeypatch.setattr(persist, "COMPACT_MIN_BYTES", 0)
    with _open(tmp_path / "s") as store:
        for b in range(5):
            store.add(_batch(b))
        saved = SavedBM25(str(tmp_path / "s"), "corrective_rag")
        with open(saved.snapshot, encoding="utf-8") as fh:
            snapshot_ids = json.load(fh)["ids"]
        assert 0 < len(snapshot_ids) <= 250
        assert saved.log_size() <= os.path.getsize(saved.snapshot)
    with capture_logs() as logs, _open(tmp_path / "s") as store:
        assert 250 == store.count()
    assert [] == [e for e in logs if e["event"] == "bm25_repaired"]


def test_uncommitted_and_torn_log_lines_are_dropped_at_open(tmp_path) -> None:
    """A log line chroma never confirmed, and a torn one, are cut at open without a repair."""
    with _open(tmp_path / "s") as store:
        store.add(_batch(0))
        stamp = store._stamp
    saved = SavedBM25(str(tmp_path / "s"), "corrective_rag")
    committed = saved.log_size()
    ghost = {"prev": stamp, "stamp": "ghost", "put": {"ghost": "ghost text"}, "del": []}
    with open(saved.log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(ghost) + "\n" + '{"prev": "ghost", "sta')
    with capture_logs() as logs, _open(tmp_path / "s") as store:
        assert "ghost" not in store.ids()
        assert 50 == store.count()
    assert [] == [e for e in logs if e["event"] == "bm25_repaired"]
    assert committed == saved.log_size()


def test_failed_chroma_stamp_cuts_the_log_back(tmp_path) -> None:
    """When chroma refuses the new stamp after the log append, the log line is taken back."""
    with _open(tmp_path / "s") as store:
        store.add(_batch(0))
        saved = SavedBM25(str(tmp_path / "s"), "corrective_rag")
        committed = saved.log_size()
        dense = store._dense
        real = dense.set_stamp

        def refuse(stamp: str) -> None:
            if stamp != store._stamp:  # the new write's stamp; the rollback's old one passes
                raise OSError("disk full")
            real(stamp)

        dense.set_stamp = refuse  # type: ignore[method-assign]
        with pytest.raises(StoreError, match="rolled back"):
            store.add(_batch(1))
        assert committed == saved.log_size()
        assert 50 == store.count() == dense.count()
    with capture_logs() as logs, _open(tmp_path / "s") as store:
        assert 50 == store.count()
    assert [] == [e for e in logs if e["event"] == "bm25_repaired"]
