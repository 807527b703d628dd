"""The ONNX export cache: verified against its source model, cleaned after a kill, placed where
the environment says, and replaced by torch where nothing can be written."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from structlog.testing import capture_logs

from corrective_rag.models import onnx_embedder, onnx_export
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.models.onnx_embedder import OnnxEmbedder
from corrective_rag.models.onnx_export import (
    REFERENCE_TEXTS,
    STALE_AFTER,
    check_file,
    clean_stale_exports,
    default_cache_dir,
    read_record,
    record_path,
)
from corrective_rag.models.source import model_source

TEXTS = [
    "How do I create a temporary file?",
    "Mount St. Helens erupted explosively in May 1980 in Washington state, killing 57 people.",
    "Sourdough bread rises through the fermentation of wild yeast and lactobacilli.",
]
UNRELATED = ("Bees collect nectar from flowers.", "The bond market fell after the rate decision.")


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return SentenceTransformerEmbedder(cache_size=0).embed(TEXTS)


def _copy_export(source: Path, folder: Path) -> Path:
    """A copy of ``source``'s float32 export and its record in ``folder`` (times kept)."""
    folder.mkdir(parents=True, exist_ok=True)
    (path,) = source.glob("*.onnx")
    shutil.copy2(path, folder / path.name)
    shutil.copy2(record_path(path), record_path(folder / path.name))
    return folder / path.name


def _zero_token_embeddings(path: Path) -> None:
    """Rewrite ``path`` as a valid ONNX graph whose token embeddings are all zero."""
    model = onnx.load(str(path))
    (table,) = [i for i in model.graph.initializer if i.name.endswith("word_embeddings.weight")]
    table.raw_data = bytes(len(table.raw_data))
    onnx.save(model, str(path))


def _exported_again(folder: Path, torch_vectors: np.ndarray) -> str:
    """Why a fresh embedder over ``folder`` rejected its cached export; it exported it again
    and now embeds torch's vectors."""
    embedder = OnnxEmbedder(cache_dir=folder, cache_size=0)
    with capture_logs() as logs:
        vectors = embedder.embed(TEXTS)
    assert 1 == embedder.exports
    np.testing.assert_allclose(torch_vectors, vectors, atol=2e-5)
    (rejected,) = [e for e in logs if e["event"] == "onnx_export_rejected"]
    return str(rejected["reason"])


@pytest.mark.parametrize("keep_time", [False, True], ids=["new-mtime", "size-and-mtime-kept"])
def test_an_altered_export_is_exported_again_never_used(
    float32_dir, tmp_path, torch_vectors, keep_time
):
    """A cached export with zeroed token embeddings (valid ONNX; unrelated texts at a cosine
    above 0.9) is rejected, by its sha256 or, with its size and time kept, by its reference
    vectors, and exported again: the vectors are torch's."""
    path = _copy_export(float32_dir, tmp_path)
    before = path.stat()
    _zero_token_embeddings(path)
    if keep_time:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert before.st_size == path.stat().st_size
    tampered = onnx_embedder._Runtime(model_source(OnnxEmbedder().name), path, None)
    a, b = tampered.encode(list(UNRELATED), 1)
    assert float(a @ b) > 0.9  # what the old code embedded with, silently
    reason = _exported_again(tmp_path, torch_vectors)
    assert ("reference texts" if keep_time else "sha256") in reason


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_forged_export_with_a_record_rewritten_to_match_is_exported_again(
    float32_dir, tmp_path, torch_vectors
):
    """Issue 48 item 5: a tampered export whose record was rewritten to match it (its sha256,
    size, mtime and its own vectors of the reference texts) passed, and every text embedded
    alike. The reference now ships with the package: the forgery is refused, exported again."""
    path = _copy_export(float32_dir, tmp_path)
    _zero_token_embeddings(path)
    tampered = onnx_embedder._Runtime(model_source(OnnxEmbedder().name), path, None)
    info = path.stat()
    forged = {
        "sha256": _sha256(path),
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "precision": "float32",
        "texts": list(REFERENCE_TEXTS),
        "vectors": tampered.encode(list(REFERENCE_TEXTS), 1).tolist(),
    }
    record_path(path).write_text(json.dumps(forged), encoding="utf-8")
    assert check_file(path, read_record(path)) is None  # the record describes the forged file
    assert "reference texts" in _exported_again(tmp_path, torch_vectors)


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (b"[" * 200_000, "larger than 65,536 bytes"),
        (b"[" * 1_000, "nested deeper than"),
        (b'{"sha256": "\xff\xfe"}', "not UTF-8"),
        (None, "a device, not a regular file"),
        (b'{"sha256": "x"}', "not an export record"),
    ],
    ids=["200000-brackets", "1000-brackets", "not-utf8", "device", "fields-missing"],
)
def test_a_hostile_export_record_is_one_line_and_an_export_again(
    float32_dir, tmp_path, record, reason
):
    """Issue 48 item 4: an export record of 200,000 ``[`` made every embed fail with
    RecursionError. A record that is hostile or damaged is refused in one line naming it, and
    the export is taken as unverified (exported again, as the next test shows)."""
    path = _copy_export(float32_dir, tmp_path)
    record_path(path).unlink()
    if record is None:
        record_path(path).symlink_to("/dev/zero")
    else:
        record_path(path).write_bytes(record)
    folder = model_source(OnnxEmbedder().name)
    runtime, problem = onnx_embedder._verified(folder, path, None, "float32", lambda: None)
    assert runtime is None
    assert f"{record_path(path)}: " in problem and reason in problem and "\n" not in problem


def test_a_record_of_200000_brackets_is_exported_again(float32_dir, tmp_path, torch_vectors):
    """The whole way: a record of 200,000 ``[`` costs one export again, never a failed embed."""
    path = _copy_export(float32_dir, tmp_path)
    record_path(path).write_bytes(b"[" * 200_000)
    assert "larger than" in _exported_again(tmp_path, torch_vectors)
    assert 4 == len(read_record(path).__slots__)  # a record of the new kind was written


def test_check_file_hashes_only_a_file_whose_size_or_time_changed(float32_dir, tmp_path):
    """A copy with a new time but the same bytes passes (hashed); one changed byte fails."""
    path = _copy_export(float32_dir, tmp_path)
    record = read_record(path)
    assert record is not None and check_file(path, record) is None
    shutil.copyfile(path, tmp_path / "copy.onnx")  # new mtime, same bytes
    assert check_file(tmp_path / "copy.onnx", record) is None
    with open(path, "r+b") as fh:
        fh.seek(record.size // 2)
        byte = fh.read(1)
        fh.seek(record.size // 2)
        fh.write(bytes([byte[0] ^ 0xFF]))
    os.utime(path, ns=(record.mtime_ns, record.mtime_ns + 1))
    assert "sha256" in (check_file(path, record) or "")


# The child exports until its work folder holds the traced graph, says so, and waits to be
# killed: SIGKILL cannot be handled, and the other signals are set to their defaults so that
# a parent that ignores SIGINT (a background job) changes nothing.
_EXPORTER = """
import signal, sys, threading
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, signal.SIG_DFL)
from corrective_rag.models import onnx_export
from corrective_rag.models.onnx_embedder import OnnxEmbedder

def fuse(source, target, config):
    print("traced", source.parent, flush=True)
    threading.Event().wait()

onnx_export._fuse = fuse
OnnxEmbedder(cache_dir=sys.argv[1]).embed(["export"])
"""


@pytest.mark.timeout(900)
def test_a_killed_exports_work_folder_is_removed_by_the_next_export(tmp_path, torch_vectors):
    """An exporter SIGKILLed mid-export leaves its work folder (the 87 MB traced graph); it is
    kept while its exporter lives and removed by the next export, which leaves no work folder."""
    child = subprocess.Popen(
        [sys.executable, "-c", _EXPORTER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        line = child.stdout.readline()  # blocks until the child has traced
        assert line.startswith("traced "), line
        work = Path(line.split(" ", 1)[1].strip())
        assert (work / "plain.onnx").stat().st_size > 1_000_000
        assert [] == clean_stale_exports(tmp_path)  # its exporter is alive: kept
        child.send_signal(signal.SIGKILL)
        assert -signal.SIGKILL == child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
    assert work.is_dir()  # what the old code left behind on every kill
    embedder = OnnxEmbedder(cache_dir=tmp_path, cache_size=0)
    np.testing.assert_allclose(torch_vectors, embedder.embed(TEXTS), atol=2e-5)
    assert 1 == embedder.exports
    assert [] == sorted(p.name for p in tmp_path.glob(".export-*"))


def test_work_folders_of_unknown_exporters_are_removed_only_once_old(tmp_path):
    """A work folder naming another host, or none (an older version's), is removed once
    nothing in it changed for STALE_AFTER seconds, never sooner; this process's is kept."""
    names = [".export-abc123_x", f".export-4242@elsewhere.example-{'q' * 8}"]
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "plain.onnx").write_bytes(b"x")
    own = tmp_path / f".export-{os.getpid()}@{onnx_export._host()}-abcdefgh"
    own.mkdir()
    now = time.time()
    assert [] == clean_stale_exports(tmp_path, now=now)
    removed = clean_stale_exports(tmp_path, now=now + STALE_AFTER + 60)
    assert sorted(tmp_path / n for n in names) == sorted(removed)
    assert [own] == sorted(tmp_path.glob(".export-*"))


def test_default_cache_dir_follows_corrective_rag_cache_then_xdg_then_home(monkeypatch, tmp_path):
    """CORRECTIVE_RAG_CACHE wins over XDG_CACHE_HOME, which wins over ~/.cache (a relative
    XDG_CACHE_HOME is ignored, as the XDG specification says)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CORRECTIVE_RAG_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert tmp_path / "home/.cache/corrective_rag/onnx" == default_cache_dir()
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert tmp_path / "home/.cache/corrective_rag/onnx" == default_cache_dir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tmp_path / "xdg/corrective_rag/onnx" == default_cache_dir()
    monkeypatch.setenv("CORRECTIVE_RAG_CACHE", str(tmp_path / "own"))
    assert tmp_path / "own/onnx" == default_cache_dir()


def test_corrective_rag_cache_is_where_the_embedder_finds_its_export(
    float32_dir, monkeypatch, tmp_path
):
    """An embedder made with no cache_dir uses the export under $CORRECTIVE_RAG_CACHE."""
    path = _copy_export(float32_dir, tmp_path / "own" / "onnx")
    monkeypatch.setenv("CORRECTIVE_RAG_CACHE", str(tmp_path / "own"))
    monkeypatch.setenv("HOME", str(tmp_path / "not-a-folder" / "home"))
    (tmp_path / "not-a-folder").write_text("a file where a folder is expected")
    embedder = OnnxEmbedder()
    assert path == embedder.onnx_path()
    assert (1, 384) == embedder.embed(["tea"]).shape
    assert 0 == embedder.exports and embedder.torch_fallback is None


def test_an_unwritable_cache_embeds_with_torch_and_warns(tmp_path, torch_vectors):
    """A cache folder that cannot be made (its parent is a file: root ignores permissions)
    embeds with torch, with a warning, instead of failing."""
    (tmp_path / "file").write_text("a file where a folder is expected")
    embedder = OnnxEmbedder(cache_dir=tmp_path / "file" / "onnx", cache_size=0)
    with capture_logs() as logs:
        vectors = embedder.embed(TEXTS)
    np.testing.assert_allclose(torch_vectors, vectors, atol=1e-6)  # torch, one text a pass
    assert 0 == embedder.exports and "file/onnx" in (embedder.torch_fallback or "")
    assert 384 == embedder.dimension
    spans = embedder.embed_spans([TEXTS[0]], [[(0, 9)]])[1][0]
    assert (1, 384) == spans.shape
    assert ["onnx_export_unwritable_embedding_with_torch"] == [
        e["event"] for e in logs if e["log_level"] == "warning"
    ]


def _index(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``corrective-rag index`` of one file with HOME under a regular file, and ``env``."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bees.txt").write_text("Bees collect nectar and pollen from flowers.")
    (tmp_path / "file").write_text("a file where HOME's parent folder is expected")
    base = {
        k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "CORRECTIVE_RAG_CACHE")
    }
    store = str(tmp_path / "store")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "corrective_rag",
            "index",
            str(docs),
            "--store",
            store,
            "--no-progress",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **base,
            "HOME": str(tmp_path / "file" / "home"),
            "PYTHONPATH": os.pathsep.join(sys.path),
            **env,
        },
    )


def test_cli_with_an_unusable_home_reads_the_export_under_xdg_cache_home(float32_dir, tmp_path):
    """With HOME unusable, `index` finds the export under $XDG_CACHE_HOME: exit 0, no export,
    no warning."""
    cache = tmp_path / "xdg" / "corrective_rag" / "onnx"
    _copy_export(float32_dir, cache)
    before = sorted(p.name for p in cache.iterdir())
    done = _index(tmp_path, {"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert 0 == done.returncode, done.stderr
    assert before == sorted(p.name for p in cache.iterdir())
    assert "onnx_export" not in done.stderr


def test_cli_with_nothing_writable_embeds_with_torch_and_warns(tmp_path):
    """With HOME unusable and no cache variable, `index` embeds with torch and says so on
    stderr: exit 0, not 2."""
    done = _index(tmp_path, {})
    assert 0 == done.returncode, done.stderr
    assert "onnx_export_unwritable_embedding_with_torch" in done.stderr
    assert "CORRECTIVE_RAG_CACHE" in done.stderr
