"""Loading files into Documents: text, Markdown, JSONL, BEIR corpora, windows and errors."""

from __future__ import annotations

import json

import pytest

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.store.loaders import iter_documents, load_documents

LONG = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(120))


def test_long_text_is_split_into_overlapping_windows(tmp_path) -> None:
    """A long .txt file becomes PATH#i chunks whose offsets slice the file's text."""
    path = tmp_path / "notes.txt"
    path.write_text(LONG, encoding="utf-8")
    docs = load_documents(path, chunk_tokens=64, overlap=16)
    assert len(docs) > 5
    assert [f"{path}#{i}" for i in range(len(docs))] == [d.id for d in docs]
    for doc in docs:
        assert LONG[doc.metadata["start"] : doc.metadata["end"]] == doc.text
        assert str(path) == doc.metadata["source"]
    assert docs[1].metadata["start"] < docs[0].metadata["end"]  # windows overlap
    assert len(LONG) == docs[-1].metadata["end"]


def test_short_markdown_is_one_chunk_and_directories_are_walked(tmp_path) -> None:
    """A directory yields each supported file in sorted order; a short file is one chunk #0."""
    (tmp_path / "b.md").write_text("# Title\n\nBody text.", encoding="utf-8")
    (tmp_path / "a.txt").write_text("First file.", encoding="utf-8")
    (tmp_path / "skip.bin").write_bytes(b"\x00\x01")
    docs = load_documents(tmp_path)
    assert [f"{tmp_path / 'a.txt'}#0", f"{tmp_path / 'b.md'}#0"] == [d.id for d in docs]


def test_jsonl_records_keep_ids_and_metadata(tmp_path) -> None:
    """JSONL records keep their id and flat metadata; a long record becomes ID#i chunks."""
    path = tmp_path / "docs.jsonl"
    rows = [
        {"id": "short", "text": "A short record.", "metadata": {"lang": "en", "year": 2020}},
        {"id": "long", "text": LONG},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    docs = load_documents(path, chunk_tokens=128, overlap=0)
    assert "short" == docs[0].id
    assert {"lang": "en", "year": 2020, "source": str(path), "line": 1, "chunk": 0} == {
        k: v for k, v in docs[0].metadata.items() if k not in ("start", "end")
    }
    assert ["long#0", "long#1"] == [d.id for d in docs[1:3]]
    assert 2 == docs[1].metadata["line"]


def test_beir_corpus_indexes_title_with_text(tmp_path) -> None:
    """BEIR records (_id, title, text) index the title in front of the text and keep it."""
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"_id": "7", "title": "Wings", "text": "Lift and drag."}) + "\n")
    [doc] = load_documents(path, chunk_tokens=None)
    assert ("7", "Wings\nLift and drag.", "Wings") == (doc.id, doc.text, doc.metadata["title"])


def test_bad_jsonl_names_file_and_line(tmp_path) -> None:
    """Invalid JSON, a missing id and an empty record are reported with file name and line."""
    path = tmp_path / "bad.jsonl"
    for line, needle in (("{not json", "not valid JSON"), ('{"text": "x"}', "'id'")):
        path.write_text('{"id": "ok", "text": "fine"}\n' + line + "\n")
        with pytest.raises(InputError, match=rf"bad\.jsonl:2: .*{needle}"):
            load_documents(path)
    path.write_text('{"id": "e", "text": " "}\n{"id": "ok", "text": "fine"}\n')
    with pytest.raises(InputError, match=r"bad\.jsonl:1"):
        load_documents(path)
    assert ["ok"] == [d.id for d in load_documents(path, skip_empty=True)]


def test_bad_files_and_options_are_refused(tmp_path) -> None:
    """Missing files, unknown suffixes, non-UTF-8 text and bad window sizes raise our errors."""
    with pytest.raises(InputError, match=r"missing\.txt"):
        load_documents(tmp_path / "missing.txt")
    (tmp_path / "data.csv").write_text("a,b")
    with pytest.raises(InputError, match=r"data\.csv"):
        load_documents(tmp_path / "data.csv")
    (tmp_path / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin\.txt"):
        load_documents(tmp_path / "latin.txt")
    with pytest.raises(ConfigError):
        list(iter_documents(tmp_path, chunk_tokens=10, overlap=10))


class RunWindower:
    """Every run without white space is one token, as a WordPiece tokenizer sees a hex dump."""

    def __init__(self) -> None:
        self.chars = 0  # characters tokenized, over every call

    def windows(self, text, size, overlap):
        import re

        from corrective_rag.models.tokens import token_windows

        self.chars += len(text)
        starts = [m.start() for m in re.finditer(r"\S+", text)]
        return token_windows(text, starts, size, overlap)


def _hex_dump(path, chars: int) -> str:
    text = ("0123456789abcdef" * (chars // 16 + 1))[:chars]
    path.write_text(text, encoding="utf-8")
    return text


def test_a_run_without_word_breaks_is_cut_into_bounded_windows(tmp_path) -> None:
    """A 1.2 MB hex dump becomes windows of at most WINDOW_CHARS that tile the file."""
    from corrective_rag.store.chunking import WINDOW_CHARS

    path = tmp_path / "dump.txt"
    text = _hex_dump(path, 1_200_000)
    docs = load_documents(path, chunk_tokens=256, overlap=32)
    assert max(len(d.text) for d in docs) <= WINDOW_CHARS
    assert text == "".join(d.text for d in docs)
    assert all(text[d.metadata["start"] : d.metadata["end"]] == d.text for d in docs)


def test_windowing_a_long_run_is_linear(tmp_path) -> None:
    """A 3 MB run without white space is tokenized about once, not once per block."""
    path = tmp_path / "dump.txt"
    _hex_dump(path, 3_000_000)
    windower = RunWindower()
    docs = list(iter_documents(path, chunk_tokens=256, overlap=32, counter=windower))
    assert windower.chars < 2 * 3_000_000
    assert len(docs) > 300


def test_a_record_without_word_breaks_is_cut_too(tmp_path) -> None:
    """A JSONL record of one long run is cut into bounded windows as a text file is."""
    from corrective_rag.store.chunking import WINDOW_CHARS

    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"id": "r", "text": "ab" * 20_000}) + "\n", encoding="utf-8")
    docs = load_documents(path, chunk_tokens=64, overlap=0, counter=RunWindower())
    assert 5 == len(docs)
    assert max(len(d.text) for d in docs) <= WINDOW_CHARS


def test_a_whole_text_too_long_for_a_document_is_skipped_or_named(tmp_path) -> None:
    """Kept whole, a text over the store's limit is skipped with skip_unreadable, else named."""
    from corrective_rag.store.loaders import UnreadableFileError

    _hex_dump(tmp_path / "dump.txt", 1_100_000)
    (tmp_path / "note.txt").write_text("A short note.", encoding="utf-8")
    skipped = []
    docs = list(
        iter_documents(tmp_path, chunk_tokens=None, skip_unreadable=lambda p, w: skipped.append(w))
    )
    assert ["note.txt#0"] == [d.id.rsplit("/", 1)[-1] for d in docs]
    assert 1 == len(skipped) and "1100000 characters" in skipped[0]
    with pytest.raises(UnreadableFileError, match=r"dump\.txt: 1100000 characters"):
        list(iter_documents(tmp_path, chunk_tokens=None))
