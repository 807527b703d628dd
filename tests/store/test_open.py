"""Opening stores: only `index` creates one, readers need no write access, construction is cheap,
and the dense backend is a small protocol (a second backend is one class)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from corrective_rag.cli.main import main
from corrective_rag.errors import InputError, StoreError
from corrective_rag.store.backend import Backend, Record
from corrective_rag.store.chroma import ChromaBackend
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.types import Document

REPO = Path(__file__).resolve().parents[2]
DIM = 64
EMBEDDER_SOURCE = textwrap.dedent(
    """
    import hashlib
    import numpy as np
    from corrective_rag.text import tokenize

    class HashEmbedder:
        def embed(self, texts):
            out = np.zeros((len(texts), 64), dtype=np.float32)
            for row, text in enumerate(texts):
                for token in tokenize(text):
                    digest = hashlib.blake2b(token.encode(), digest_size=4).digest()
                    out[row, int.from_bytes(digest, "big") % 64] += 1.0
                norm = float(np.linalg.norm(out[row]))
                out[row] = out[row] / norm if norm else out[row]
            return out
    """
)
namespace: dict[str, Any] = {}
exec(EMBEDDER_SOURCE, namespace)  # the same embedder in this process and in the child below
HashEmbedder = namespace["HashEmbedder"]
DOCS = [
    Document("owl", "Owls are nocturnal birds of prey.", {"kind": "animal"}),
    Document("tea", "Green tea is brewed from leaves.", {"kind": "food"}),
    Document("mars", "Mars is a red planet with iron oxide dust.", {"kind": "space"}),
]


def _listing(path: Path) -> list[tuple[str, int, int]]:
    return sorted(
        (str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns) for p in path.rglob("*")
    )


@pytest.mark.parametrize("command", ["run", "batch", "index"])
def test_commands_refuse_a_folder_that_is_not_a_store(tmp_path, capsys, command) -> None:
    """run/batch/index on a folder of other files print one error line and change nothing."""
    folder = tmp_path / "mydocs"
    folder.mkdir()
    (folder / "notes.txt").write_text("Owls hunt at night.", encoding="utf-8")
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "a", "query": "owls"}\n', encoding="utf-8")
    before = _listing(folder)
    argv = {
        "run": ["run", "owls"],
        "batch": ["batch", str(queries), "--out", str(tmp_path / "out.jsonl"), "--no-progress"],
        "index": ["index", str(folder / "notes.txt"), "--no-progress"],
    }[command]
    assert 1 == main([*argv, "--store", str(folder)])
    err = capsys.readouterr().err.strip().splitlines()
    assert 1 == len(err) and "is not a corrective_rag store" in err[0]
    assert before == _listing(folder)


@pytest.mark.parametrize("state", ["missing", "empty"])
def test_only_index_creates_a_store(tmp_path, capsys, state) -> None:
    """run on a missing or empty folder is refused without creating anything; index creates."""
    folder = tmp_path / "store"
    if state == "empty":
        folder.mkdir()
    assert 1 == main(["run", "owls", "--store", str(folder)])
    assert "store not found" in capsys.readouterr().err
    assert (state == "empty") == folder.exists()
    assert [] == (list(folder.iterdir()) if folder.exists() else [])
    with pytest.raises(StoreError, match="store not found"):
        HybridStore.open(folder, create=False)
    doc = tmp_path / "a.txt"
    doc.write_text("Owls hunt at night.", encoding="utf-8")
    assert 0 == main(["index", str(doc), "--store", str(folder), "--no-progress"])
    assert 0 == main(["run", "owls", "--store", str(folder)])


def test_reader_needs_no_lock_and_refuses_writes(tmp_path) -> None:
    """A read-only store opens while a writer holds the folder, searches, and refuses writes."""
    with HybridStore.open(tmp_path / "s", embedder=HashEmbedder()) as writer:
        writer.add(DOCS)
        with HybridStore.open(tmp_path / "s", read_only=True, embedder=HashEmbedder()) as reader:
            assert "mars" == reader.retrieve("red planet dust", top_k=1)[0].document.id
            with pytest.raises(StoreError, match="read-only"):
                reader.add([Document("x", "text")])
            with pytest.raises(StoreError, match="read-only"):
                reader.delete(["owl"])
        assert 3 == writer.count()


CHILD = textwrap.dedent(
    """
    import sys
    from corrective_rag.store.hybrid import HybridStore
    with HybridStore.open(sys.argv[1], read_only=True, embedder=HashEmbedder()) as store:
        print(store.retrieve("red planet dust", top_k=1)[0].document.id, store.count())
    """
)


def _read_only_child(folder: Path) -> subprocess.CompletedProcess[str]:
    """Run CHILD on ``folder`` made read-only: a read-only bind mount as root, else modes."""
    code = EMBEDDER_SOURCE + CHILD
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if os.geteuid() != 0:
        for p in [folder, *folder.rglob("*")]:
            p.chmod(p.stat().st_mode & ~0o222)
        try:
            return subprocess.run(
                [sys.executable, "-c", code, str(folder)],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
        finally:
            for p in [folder, *folder.rglob("*")]:
                p.chmod(p.stat().st_mode | 0o200)
    if shutil.which("unshare") is None:
        pytest.skip("root without unshare: cannot make a read-only folder")
    script = (
        f'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && '
        f'! touch "$1/probe" 2>/dev/null && exec "{sys.executable}" -c "$2" "$1"'
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", str(folder), code],
        env=env,
        check=False,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 and "mount" in done.stderr and "denied" in done.stderr.lower():
        pytest.skip(f"cannot mount read-only here: {done.stderr.strip()}")
    return done


@pytest.mark.slow
def test_store_on_a_read_only_folder_is_queryable(tmp_path) -> None:
    """A store whose folder cannot be written is opened read-only and answers queries."""
    folder = tmp_path / "s"
    with HybridStore.open(folder, embedder=HashEmbedder()) as store:
        store.add(DOCS)
    before = _listing(folder)
    done = _read_only_child(folder)
    assert 0 == done.returncode, done.stderr[-2000:]
    assert "mars 3" == done.stdout.strip().splitlines()[-1]
    assert before == _listing(folder)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_construction_is_cheap_and_warm_up_is_the_heavy_step(tmp_path) -> None:
    """Constructing contacts nothing and writes no chroma file; warm_up (or first use) does."""
    store = HybridStore.connect("127.0.0.1", _closed_port(), embedder=HashEmbedder())
    with pytest.raises(StoreError):
        store.warm_up()
    store.close()
    with HybridStore.open(tmp_path / "s", embedder=HashEmbedder()) as lazy:
        assert not (tmp_path / "s" / "chroma.sqlite3").exists()
        lazy.warm_up()
        assert (tmp_path / "s" / "chroma.sqlite3").exists()
    with HybridStore.open(tmp_path / "s", embedder=HashEmbedder()) as used:
        assert 0 == used.count()  # the first use warms up


class ArrayIndex:
    """A third backend in one class: exact cosine search over numpy rows, BM25 kept beside."""

    lexical = None  # no BM25 of its own: the store keeps one beside

    def __init__(self) -> None:
        self.rows: dict[str, Record] = {}

    def count(self) -> int:
        return len(self.rows)

    def fetch(self, ids: Sequence[str], *, vectors: bool = False) -> dict[str, Record]:
        return {i: self.rows[i] for i in ids if i in self.rows}

    def write(
        self,
        documents: Sequence[Document],
        embeddings: npt.NDArray[np.float32],
        previous: Mapping[str, Record],
    ) -> None:
        for doc, vector in zip(documents, embeddings, strict=True):
            self.rows[doc.id] = Record(doc, vector)

    def delete(self, ids: Sequence[str]) -> None:
        for i in ids:
            self.rows.pop(i, None)

    def dense(
        self, vector: npt.NDArray[np.float32], depth: int, where: Mapping[str, Any] | None
    ) -> list[tuple[str, float]]:
        allowed = set(self.ids(where))
        scored = [(i, float(r.embedding @ vector)) for i, r in self.rows.items() if i in allowed]
        return sorted(scored, key=lambda p: -p[1])[:depth]

    def dense_many(
        self, vectors: npt.NDArray[np.float32], depth: int, where: Mapping[str, Any] | None
    ) -> list[list[tuple[str, float]]]:
        return [self.dense(vector, depth, where) for vector in vectors]

    def ids(self, where: Mapping[str, Any] | None) -> list[str]:
        if where is None:
            return list(self.rows)
        if any(k.startswith("$") or isinstance(v, dict) for k, v in where.items()):
            raise InputError(f"this backend reads equality filters only: {where!r}")
        return [
            i
            for i, r in self.rows.items()
            if all(r.document.metadata.get(k) == v for k, v in where.items())
        ]

    def close(self) -> None:
        self.rows.clear()


def test_a_second_dense_backend_is_one_class() -> None:
    """HybridStore runs on any Backend: writes, filtered fused search and deletes work."""
    backend = ArrayIndex()
    assert isinstance(backend, Backend)
    assert isinstance(ChromaBackend(SimpleNamespace(metadata={})), Backend)
    with HybridStore(backend, embedder=HashEmbedder()) as store:
        store.add(DOCS)
        hits = store.retrieve("red planet dust", top_k=2)
        assert "mars" == hits[0].document.id
        assert {"bm25", "dense"} == {leg.leg for leg in hits[0].legs}
        assert ["owl"] == [h.document.id for h in store.retrieve("birds", where={"kind": "animal"})]
        assert 1 == store.delete(["mars"])
        assert {"owl", "tea"} == set(backend.ids(None)) == set(store.ids())
        assert "mars" not in {h.document.id for h in store.retrieve("planet")}
    assert 0 == backend.count()  # close() reached the backend


def test_a_read_only_open_of_a_missing_collection_names_those_there_and_creates_none(
    tmp_path,
) -> None:
    """A reader asking for a collection the store lacks gets a StoreError; none is created."""
    import chromadb

    folder = tmp_path / "s"
    with HybridStore.open(folder, embedder=HashEmbedder()) as writer:
        writer.add(DOCS)
    reader = HybridStore.open(
        folder, read_only=True, collection="corective_rag", embedder=HashEmbedder()
    )
    with pytest.raises(StoreError, match=r"'corective_rag' not found.*'corrective_rag'"):
        reader.count()
    reader.close()
    client = chromadb.PersistentClient(path=str(folder))
    try:
        assert ["corrective_rag"] == sorted(c.name for c in client.list_collections())
    finally:
        client.close()


def _two_stores(tmp_path: Path) -> tuple[str, str]:
    stores = []
    for name, text in (("main", "Owls hunt at night."), ("more", "Barn owls nest in barns.")):
        doc = tmp_path / f"{name}.txt"
        doc.write_text(text, encoding="utf-8")
        store = str(tmp_path / f"store-{name}")
        assert 0 == main(["index", str(doc), "--store", store, "--no-progress"])
        stores.append(store)
    return stores[0], stores[1]


def test_a_fallback_store_is_read_while_a_writer_holds_it(tmp_path) -> None:
    """--fallback-store opens read-only: a writer's lock on it does not stop a run."""
    store, fallback = _two_stores(tmp_path)
    with HybridStore.open(fallback, embedder=HashEmbedder()):  # a writer holds the folder
        assert 0 == main(["run", "owls", "--store", store, "--fallback-store", fallback])


def test_an_empty_fallback_folder_is_refused_and_stays_empty(tmp_path) -> None:
    """--fallback-store on an empty folder is an error; no store is created there."""
    store, _ = _two_stores(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert 0 != main(["run", "owls", "--store", store, "--fallback-store", str(empty)])
    assert [] == list(empty.iterdir())


def _files(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _rows(database: Path) -> set[str]:
    import sqlite3

    with sqlite3.connect(database) as conn:
        return set(conn.iterdump())


def test_a_reader_writes_only_what_chroma_itself_writes_at_open(tmp_path) -> None:
    """A read-only open and search changes no file of ours and no stored record: chroma adds
    its `acquire_write` row and may save its HNSW files (docs/store.md, "Read-only stores")."""
    from corrective_rag.testing.filter_contract import LetterEmbedder

    folder = tmp_path / "s"
    docs = [Document(f"d{i}", f"document {i} about topic {i % 7}") for i in range(150)]
    with HybridStore.open(folder, embedder=LetterEmbedder()) as writer:
        writer.add(docs)
    before, rows = _files(folder), _rows(folder / "chroma.sqlite3")
    with HybridStore.open(folder, read_only=True, embedder=LetterEmbedder()) as reader:
        assert 5 == len(reader.retrieve("topic 3", top_k=5))
        stored = reader.get([d.id for d in docs])
    after = _files(folder)

    assert sorted(before) == sorted(after)  # nothing made or removed: no lock, no copy
    changed = {name for name in before if before[name] != after[name]}
    ours = {name for name in before if name.startswith(("bm25-", ".corrective"))}
    assert ours and not changed & ours
    hnsw = {
        "data_level0.bin",
        "header.bin",
        "length.bin",
        "link_lists.bin",
        "index_metadata.pickle",
    }
    assert {Path(n).name for n in changed - {"chroma.sqlite3"}} <= hnsw
    added = _rows(folder / "chroma.sqlite3") - rows
    assert rows - _rows(folder / "chroma.sqlite3") == set()
    assert all(line.startswith('INSERT INTO "acquire_write"') for line in added), added
    assert docs == stored


class SixteenEmbedder:
    """Another embedder: 16-dimensional vectors, where the store was built with 27."""

    name = "sixteen"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.full((len(texts), 16), 0.25, dtype=np.float32)


def test_a_store_read_with_another_embedder_names_both(tmp_path) -> None:
    """Searching or writing with another embedder is a StoreError naming both embedders."""
    from corrective_rag.testing.filter_contract import LetterEmbedder

    folder = tmp_path / "s"
    with HybridStore.open(folder, embedder=LetterEmbedder()) as writer:
        writer.add(DOCS)
    calls = {
        "retrieve": lambda store: store.retrieve("red planet dust"),
        "dense search": lambda store: store.search("red planet dust", leg="dense"),
        "upsert": lambda store: store.upsert([Document("x", "a new text")]),
    }
    for name, call in calls.items():
        with (
            HybridStore.open(folder, embedder=SixteenEmbedder()) as store,
            pytest.raises(StoreError) as caught,
        ):
            call(store)
        message = str(caught.value)
        assert "invalid metadata filter" not in message, name
        assert "another embedder (LetterEmbedder, 27 dimensions)" in message, name
        assert "(SixteenEmbedder('sixteen'), 16 dimensions)" in message, name
    with HybridStore.open(folder, read_only=True, embedder=LetterEmbedder()) as reader:
        assert 3 == reader.count() and reader.retrieve("red planet dust")


def test_a_qdrant_store_read_with_another_embedder_names_its_width(tmp_path) -> None:
    """On Qdrant (no embedder note kept) the StoreError names both widths and the embedder."""
    pytest.importorskip("qdrant_client", reason="needs the qdrant extra")
    from corrective_rag.testing.filter_contract import LetterEmbedder

    folder = tmp_path / "q"
    with HybridStore.qdrant(folder, embedder=LetterEmbedder()) as writer:
        writer.add(DOCS)
    for call in (
        lambda store: store.retrieve("red planet dust"),
        lambda store: store.upsert([Document("x", "a new text")]),
    ):
        with (
            HybridStore.qdrant(folder, embedder=SixteenEmbedder()) as store,
            pytest.raises(StoreError, match="another embedder") as caught,
        ):
            call(store)
        assert "(an embedder of 27 dimensions)" in str(caught.value)
        assert "(SixteenEmbedder('sixteen'), 16 dimensions)" in str(caught.value)
