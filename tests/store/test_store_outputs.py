"""Stores and outputs: --qdrant folders get --store's protections, no output lands inside a store,
half-indexed files are marked and finished, file names are data, index shows a total."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_open import HashEmbedder, _listing

from corrective_rag.cli.main import main
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.store.indexing import index_documents, read_paths
from corrective_rag.types import Document


def _queries(tmp_path: Path) -> Path:
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "a", "query": "owls"}\n', encoding="utf-8")
    return queries


@pytest.mark.parametrize("command", ["run", "batch"])
def test_qdrant_commands_refuse_a_folder_that_is_not_a_store(tmp_path, capsys, command) -> None:
    """run/batch --qdrant on a folder of other files print one error and change nothing."""
    pytest.importorskip("qdrant_client")
    folder = tmp_path / "mydocs"
    folder.mkdir()
    (folder / "notes.txt").write_text("Owls hunt at night.", encoding="utf-8")
    before = _listing(folder)
    out = tmp_path / "out.jsonl"
    argv = {
        "run": ["run", "owls"],
        "batch": ["batch", str(_queries(tmp_path)), "--out", str(out), "--no-progress"],
    }[command]
    assert 1 == main([*argv, "--qdrant", str(folder)])
    assert "is not a corrective_rag store" in capsys.readouterr().err
    assert before == _listing(folder)
    assert not out.exists()


def test_qdrant_run_on_an_empty_folder_creates_nothing(tmp_path, capsys) -> None:
    """Only index makes a Qdrant store: run on an empty folder is refused and writes nothing."""
    pytest.importorskip("qdrant_client")
    folder = tmp_path / "q"
    folder.mkdir()
    assert 1 == main(["run", "owls", "--qdrant", str(folder)])
    assert "store not found" in capsys.readouterr().err
    assert [] == list(folder.iterdir())


@pytest.mark.parametrize("kind", ["store", "qdrant"])
def test_a_store_with_no_documents_is_an_error_not_an_ok_line(tmp_path, capsys, kind) -> None:
    """batch on a store that holds no documents exits 1 and records no ok result."""
    folder = tmp_path / "s"
    if kind == "qdrant":
        pytest.importorskip("qdrant_client")
        with HybridStore.qdrant(str(folder), embedder=HashEmbedder()) as store:
            store.add([Document("x", "Owls hunt at night.")])
            store.delete(["x"])
    else:
        with HybridStore.open(folder, embedder=HashEmbedder()) as store:
            store.add([Document("x", "Owls hunt at night.")])
            store.delete(["x"])
    out = tmp_path / "out.jsonl"
    argv = ["batch", str(_queries(tmp_path)), "--out", str(out), "--no-progress"]
    assert 1 == main([*argv, f"--{kind}", str(folder)])
    assert "holds no documents" in capsys.readouterr().err
    assert '"ok"' not in (out.read_text(encoding="utf-8") if out.exists() else "")


@pytest.mark.parametrize(
    ("option", "inside"), [("--summary-json", "chroma.sqlite3"), ("--out", "results.jsonl")]
)
def test_an_output_inside_the_store_is_refused(tmp_path, capsys, option, inside) -> None:
    """batch refuses an output path inside the store it reads, and the store is left intact."""
    doc = tmp_path / "a.txt"
    doc.write_text("Owls are nocturnal birds of prey.", encoding="utf-8")
    folder = tmp_path / "s"
    assert 0 == main(["index", str(doc), "--store", str(folder), "--no-progress"])
    before = _listing(folder)
    paths = {"--out": str(tmp_path / "out.jsonl"), "--summary-json": None}
    paths[option] = str(folder / inside)
    argv = ["batch", str(_queries(tmp_path)), "--out", paths["--out"], "--no-progress"]
    if paths["--summary-json"]:
        argv += ["--summary-json", paths["--summary-json"]]
    assert 1 == main([*argv, "--store", str(folder)])
    assert "inside the store folder" in capsys.readouterr().err
    assert before == _listing(folder)
    assert 0 == main(["run", "owls", "--store", str(folder)])


@pytest.mark.parametrize("odd", ["new\nline", "esc\x1b[2Jape"])
@pytest.mark.parametrize("skip", [False, True])
def test_a_file_name_with_control_characters_is_indexed_under_an_escaped_id(
    tmp_path, capsys, odd, skip
) -> None:
    """A file named with a newline or ESC is indexed under an escaped id; the rest is indexed."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text("Green tea is brewed from leaves.", encoding="utf-8")
    (docs / f"{odd}.txt").write_text("Owls are nocturnal birds of prey.", encoding="utf-8")
    folder = tmp_path / "s"
    extra = ["--skip-unreadable"] if skip else []
    assert 0 == main(["index", str(docs), "--store", str(folder), "--no-progress", *extra])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "indexed 2 documents from 2 files" in out
    escaped = odd.encode("unicode_escape").decode("ascii")
    with HybridStore.open(folder, read_only=True) as store:
        assert f"{docs.resolve()}/{escaped}.txt#0" in store.ids()
        assert "Owls" in store.retrieve("owls birds", top_k=1)[0].document.text


def test_a_failed_first_index_leaves_no_half_made_store(tmp_path, capsys) -> None:
    """A first index that fails on an unreadable file removes the store folder it made."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Green tea is brewed from leaves.", encoding="utf-8")
    (docs / "b.txt").write_bytes(b"\xff\xfe not utf-8 \xff")
    folder = tmp_path / "s"
    assert 1 == main(["index", str(docs), "--store", str(folder), "--no-progress"])
    assert "--skip-unreadable" in capsys.readouterr().err
    assert not folder.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert 1 == main(["index", str(docs), "--store", str(empty), "--no-progress"])
    assert [] == list(empty.iterdir())
    again = ["index", str(docs), "--store", str(folder), "--no-progress"]
    assert 0 == main([*again, "--skip-unreadable"])


class Interrupting:
    """A store whose n-th write is cut by Ctrl-C, as a user interrupting `index` would."""

    def __init__(self, store: HybridStore, at: int) -> None:
        self.store, self.at, self.writes = store, at, 0

    def upsert(self, documents):
        self.writes += 1
        if self.writes == self.at:
            raise KeyboardInterrupt
        self.store.upsert(documents)

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_a_half_indexed_file_is_marked_and_a_rerun_finishes_it(tmp_path) -> None:
    """Chunks of a file cut short carry incomplete=True; indexing it again clears the mark."""
    text = " ".join(f"Sentence {i} is about owls and topic {i % 7}." for i in range(120))
    (tmp_path / "big.txt").write_text(text, encoding="utf-8")
    with HybridStore.in_memory(embedder=HashEmbedder()) as store:
        with pytest.raises(KeyboardInterrupt):
            docs = read_paths(tmp_path / "big.txt", chunk_tokens=32, overlap=4)
            index_documents(Interrupting(store, at=3), docs, roots=tmp_path, batch=4)
        assert 8 == store.count()
        assert {True} == {d.metadata.get("incomplete") for d in store.get(store.ids())}
        assert 8 == len(store.ids(where={"incomplete": True}))
        docs = list(read_paths(tmp_path / "big.txt", chunk_tokens=32, overlap=4))
        report = index_documents(store, docs, roots=tmp_path, batch=4)
        assert len(docs) == report.documents == store.count()
        assert [] == store.ids(where={"incomplete": True})
        assert {None} == {d.metadata.get("incomplete") for d in store.get(store.ids())}


def test_index_progress_shows_a_total_in_chunks(tmp_path, capsys) -> None:
    """index's bar counts chunks against a total and ends at total/total."""
    text = " ".join(f"Sentence {i} is about owls and topic {i % 7}." for i in range(400))
    (tmp_path / "big.txt").write_text(text, encoding="utf-8")
    argv = ["index", str(tmp_path / "big.txt"), "--store", str(tmp_path / "s")]
    assert 0 == main([*argv, "--chunk-tokens", "64"])
    captured = capsys.readouterr()
    written = int(captured.out.split("indexed ")[1].split()[0])
    assert f"{written}/{written}" in captured.err
    assert "chunk" in captured.err


def test_the_chunk_total_is_estimated_from_the_bytes_read(tmp_path) -> None:
    """Halfway through the input the total is twice the chunks read; JSONL offsets don't count."""
    from corrective_rag.cli.progress import ChunkProgress

    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("x" * 100, encoding="utf-8")
    second.write_text("y" * 100, encoding="utf-8")
    bar = ChunkProgress(200, disable=True)
    docs = [Document(f"a#{i}", "x", {"source": str(first), "end": 25 * (i + 1)}) for i in range(4)]
    docs.append(Document("b#0", "y", {"source": str(second), "end": 0}))
    list(bar.track(docs[:2]))
    assert 8 == bar.estimate()  # 2 chunks in 50 of 200 bytes
    list(bar.track(docs[2:]))
    assert 10 == bar.estimate()  # 5 chunks in 100 bytes (a.txt whole, b.txt begun)
    jsonl = ChunkProgress(200, disable=True)
    list(jsonl.track([Document("r", "z", {"source": "c.jsonl", "line": 1, "end": 50})]))
    assert jsonl.estimate() is None
