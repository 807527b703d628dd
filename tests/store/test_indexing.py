"""Indexing a user's files: a file's chunks are one unit, ids are canonical, pruning, the CLI."""

from __future__ import annotations

import os

import pytest

from corrective_rag.cli.main import build_parser, main
from corrective_rag.errors import ConfigError
from corrective_rag.models.tokenizer import ModelTokenizer
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.store.indexing import index_paths
from corrective_rag.store.loaders import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_OVERLAP,
    UnreadableFileError,
    load_documents,
)

LONG = " ".join(f"Sentence number {i} talks about topic {i % 7} and more." for i in range(400))


@pytest.fixture
def store(embedder):
    with HybridStore.in_memory(embedder=embedder) as s:
        yield s


def test_reindexing_a_shrunk_file_replaces_all_its_chunks(tmp_path, store) -> None:
    """A file cut from many chunks to one keeps only that one chunk after re-indexing."""
    path = tmp_path / "a.txt"
    path.write_text(LONG, encoding="utf-8")
    first = index_paths(store, [tmp_path], chunk_tokens=64, overlap=8)
    assert first.documents > 10
    path.write_text("Now a single short sentence.", encoding="utf-8")
    second = index_paths(store, [tmp_path], chunk_tokens=64, overlap=8)
    assert [f"{path}#0"] == store.ids()
    assert (first.documents - 1, 1) == (second.replaced, second.documents)


def test_path_spelling_does_not_change_ids(tmp_path, store, monkeypatch) -> None:
    """The same file named relatively, absolutely and through '..' is one set of ids."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("Owls hunt at night.", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for spelling in ("in/a.txt", f"{tmp_path}/in/a.txt", "in/../in/./a.txt", "in"):
        index_paths(store, [spelling])
    assert [f"{tmp_path.resolve()}/in/a.txt#0"] == store.ids()
    assert [store.ids()[0]] == [d.id for d in load_documents(["in", "in/a.txt"])]


def test_prune_drops_documents_of_deleted_files_only_under_given_folders(tmp_path, store) -> None:
    """With prune, a deleted file's documents go; files under other folders stay."""
    docs, other = tmp_path / "docs", tmp_path / "other"
    docs.mkdir(), other.mkdir()
    (docs / "keep.txt").write_text("Tea leaves.", encoding="utf-8")
    (docs / "gone.md").write_text("Bread rises.", encoding="utf-8")
    (other / "x.txt").write_text("Mars is red.", encoding="utf-8")
    index_paths(store, [docs, other])
    (docs / "gone.md").unlink()
    assert 0 == index_paths(store, [docs]).pruned  # without prune nothing is dropped
    assert 3 == len(store.ids())
    assert 1 == index_paths(store, [docs], prune=True).pruned
    assert {f"{docs}/keep.txt#0", f"{other}/x.txt#0"} == set(store.ids())


def test_chunks_fit_the_embedding_model_and_defaults_are_shared(tmp_path) -> None:
    """Default chunks are sized in the model's own tokens and never exceed what it reads."""
    path = tmp_path / "long.txt"
    path.write_text(LONG * 3, encoding="utf-8")
    tokenizer = ModelTokenizer()
    docs = load_documents(path)
    assert DEFAULT_CHUNK_TOKENS == tokenizer.max_tokens
    assert max(tokenizer.count(d.text) for d in docs) <= DEFAULT_CHUNK_TOKENS
    assert max(tokenizer.count(d.text) for d in docs) >= DEFAULT_CHUNK_TOKENS - 8  # full windows
    with pytest.raises(ConfigError, match="reads"):
        load_documents(path, chunk_tokens=DEFAULT_CHUNK_TOKENS + 1)


def test_streamed_windows_equal_windows_of_the_whole_text(tmp_path) -> None:
    """Chunking block by block gives the same chunks as windowing the whole text at once."""
    from corrective_rag.store.chunking import stream_windows

    text = LONG * 2
    tokenizer = ModelTokenizer()
    whole = tokenizer.windows(text, 48, 12)
    pieces = (text[i : i + 333] for i in range(0, len(text), 333))
    streamed = list(stream_windows(pieces, tokenizer, 48, 12, block_chars=1000))
    assert [(w.start, w.end) for w in whole] == [(w.start, w.end) for w in streamed]
    assert all(text[w.start : w.end] == w.text for w in streamed)


def test_jsonl_with_a_byte_order_mark_is_read(tmp_path) -> None:
    """A JSONL corpus saved with a UTF-8 BOM loads like one without."""
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "a", "text": "Owls hunt."}\n')
    assert ["a"] == [d.id for d in load_documents(path)]


def test_cli_index_defaults_and_prune(tmp_path, capsys) -> None:
    """`index` uses the library's chunk default, replaces shrunk files and prunes on request."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text(LONG, encoding="utf-8")
    (docs / "b.txt").write_text("Bees make honey.", encoding="utf-8")
    store_dir = str(tmp_path / "store")
    assert 0 == main(["index", str(docs), "--store", store_dir, "--no-progress"])
    (docs / "a.txt").write_text("Short now.", encoding="utf-8")
    (docs / "b.txt").unlink()
    assert 0 == main(["index", str(docs), "--store", store_dir, "--no-progress", "--prune"])
    out = capsys.readouterr().out
    assert "1 pruned" in out
    args = build_parser().parse_args(["index", str(docs), "--store", store_dir])
    assert (DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP) == (args.chunk_tokens, args.overlap)
    with HybridStore.open(store_dir) as s:
        assert [f"{os.path.realpath(docs)}/a.txt#0"] == s.ids()


def _mixed_folder(tmp_path):
    """A folder of two good files, one Latin-1, one empty and one binary file named .txt."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Owls hunt at night.", encoding="utf-8")
    (docs / "z.md").write_text("Bees make honey.", encoding="utf-8")
    (docs / "latin.txt").write_bytes("Café crème brûlée.".encode("latin-1"))
    (docs / "empty.md").write_text("  \n", encoding="utf-8")
    (docs / "blob.txt").write_bytes(b"PK\x03\x04\x00\x00binary")
    return docs


def test_unreadable_files_are_skipped_whole_and_listed(tmp_path, store) -> None:
    """skip_unreadable indexes every readable file and reports each skipped one with its reason;
    without it the first unreadable file stops the indexing with its name."""
    docs = _mixed_folder(tmp_path)
    with pytest.raises(UnreadableFileError, match=r"blob\.txt"):
        index_paths(store, [docs])
    report = index_paths(store, [docs], skip_unreadable=True)
    assert {f"{docs}/a.txt#0", f"{docs}/z.md#0"} == set(store.ids())
    reasons = dict(report.skipped)
    assert {f"{docs}/blob.txt", f"{docs}/empty.md", f"{docs}/latin.txt"} == set(reasons)
    assert "NUL" in reasons[f"{docs}/blob.txt"]
    assert "empty" in reasons[f"{docs}/empty.md"]
    assert "not UTF-8" in reasons[f"{docs}/latin.txt"]
    assert 2 == report.files


def test_prune_keeps_what_the_store_had_of_a_file_that_became_unreadable(tmp_path, store) -> None:
    """A file indexed before and unreadable now is skipped, not pruned: its chunks stay."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Owls hunt at night.", encoding="utf-8")
    (docs / "b.txt").write_text("Bees make honey.", encoding="utf-8")
    index_paths(store, [docs])
    (docs / "b.txt").write_bytes("Bees make honey, café.".encode("latin-1"))
    report = index_paths(store, [docs], prune=True, skip_unreadable=True)
    assert (0, 1) == (report.pruned, len(report.skipped))
    assert {f"{docs}/a.txt#0", f"{docs}/b.txt#0"} == set(store.ids())


def test_cli_index_skip_unreadable(tmp_path, capsys) -> None:
    """`index` names the unreadable file and the flag; with --skip-unreadable it lists them."""
    docs = _mixed_folder(tmp_path)
    store_dir = str(tmp_path / "store")
    assert 1 == main(["index", str(docs), "--store", store_dir, "--no-progress"])
    err = capsys.readouterr().err
    assert "blob.txt" in err and "--skip-unreadable" in err
    assert 0 == main(
        ["index", str(docs), "--store", store_dir, "--no-progress", "--skip-unreadable"]
    )
    out = capsys.readouterr().out
    assert "indexed 2 documents from 2 files" in out
    assert "skipped 3 unreadable files" in out
    assert "latin.txt: not UTF-8" in out


@pytest.fixture
def unlistable(monkeypatch):
    """Makes listing the folders added to the returned set fail with PermissionError (tests run
    as root, whom permission bits do not stop)."""
    real_scandir = os.scandir
    refused: set[str] = set()

    def scandir(path=".", *args, **kwargs):
        if os.fspath(path) in refused:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", scandir)
    return refused


def test_prune_keeps_a_subfolder_that_became_unreadable(tmp_path, store, unlistable) -> None:
    """A subfolder that cannot be listed is reported as skipped, and nothing under it is pruned."""
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.txt").write_text("Owls hunt at night.", encoding="utf-8")
    (docs / "sub" / "b.txt").write_text("Bees make honey.", encoding="utf-8")
    index_paths(store, [docs])
    unlistable.add(str(docs / "sub"))
    report = index_paths(store, [docs], prune=True, skip_unreadable=True)
    assert {f"{docs}/a.txt#0", f"{docs}/sub/b.txt#0"} == set(store.ids())
    assert 0 == report.pruned
    assert [str(docs / "sub")] == [path for path, _ in report.skipped]
    assert "cannot read folder" in report.skipped[0][1]


def test_an_unreadable_subfolder_stops_indexing_without_skip(tmp_path, store, unlistable) -> None:
    """Without skip_unreadable, a subfolder that cannot be listed is an error naming it."""
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.txt").write_text("Owls hunt at night.", encoding="utf-8")
    unlistable.add(str(docs / "sub"))
    with pytest.raises(UnreadableFileError, match=r"sub: cannot read folder"):
        index_paths(store, [docs], prune=True)
    assert [] == store.ids()


def test_cli_index_skips_a_long_run_without_word_breaks(tmp_path, capsys) -> None:
    """`index --skip-unreadable` of a folder holding a 1.2 MB hex dump indexes every file."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Owls hunt at night.", encoding="utf-8")
    (docs / "dump.txt").write_text("0123456789abcdef" * 75_000, encoding="utf-8")
    store_dir = str(tmp_path / "store")
    argv = ["index", str(docs), "--store", store_dir, "--no-progress", "--skip-unreadable"]
    assert 0 == main(argv)
    assert "from 2 files" in capsys.readouterr().out
