"""Chunks per second of ``corrective-rag index`` against a bare ``SentenceTransformer.encode``.

    python benchmarks/index_speed.py /path/to/hotpotqa --limit 1000 --json out/index-speed.json

The first ``--limit`` documents of a BEIR folder are written one file each (``title``, a blank
line, ``text``) into a temporary folder, which ``corrective-rag index --store DIR`` indexes in
this process (the CLI's own entry point: chunking, embedding with the default embedder, the
chroma and BM25 writes). Then the same chunk texts go through a bare
``SentenceTransformer.encode`` of the shipped all-MiniLM-L6-v2 (torch, ``--batch`` 32, one
torch thread), the reference the issue names. Both models are loaded before their clock starts;
exporting the ONNX model (first use on a machine) is done and timed before, and reported apart.
The ratio ``index_seconds / bare_seconds`` is the figure to hold at most 0.5 (0.6 with
``--busy``). Beside the wall seconds, each side's CPU seconds (this process, all its threads)
and the machine's load average are reported: on a machine other work keeps busy, the CPU
seconds say what the work cost, the wall seconds what a user waited.

``--busy`` keeps one core busy with a side process (a Python loop) through both measurements,
as another program on the machine would: the bare encode's one thread barely notices, while
an embedder that wants every core must share one.

    python benchmarks/index_speed.py --demo [--modules N] --json out/demo-index.json

``--demo`` instead indexes the demo's stdlib chunks (its first ``N`` modules) into an in-memory
store twice in this process, as the demo does: with the torch embedder the demo used before
(``SentenceTransformerEmbedder()``) and with today's default, each model loaded and warmed
first; the ratio ``torch_seconds / default_seconds`` is the demo's indexing speed-up.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from corrective_rag.cli.main import main as cli_main
from corrective_rag.models.onnx_embedder import default_embedder
from corrective_rag.models.source import default_model_path
from corrective_rag.store.indexing import read_paths


def write_json(path: str | None, result: dict[str, Any]) -> None:
    """``result`` as indented JSON at ``path`` (nothing when ``path`` is None)."""
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)


def write_files(folder: str, out: Path, limit: int) -> int:
    """The first ``limit`` documents of ``folder``'s corpus as one text file each; how many."""
    count = 0
    with open(os.path.join(folder, "corpus.jsonl"), encoding="utf-8") as fh:
        for line in fh:
            if count >= limit:
                break
            doc = json.loads(line)
            text = f"{doc.get('title', '')}\n\n{doc.get('text', '')}".strip()
            if text:
                (out / f"doc-{count:06d}.txt").write_text(text + "\n", encoding="utf-8")
                count += 1
    return count


@contextlib.contextmanager
def busy_core(on: bool) -> Iterator[None]:
    """With ``on``, a side process spinning on one core until the block ends."""
    if not on:
        yield
        return
    side = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        side.terminate()
        side.wait(timeout=30)


def cpu_seconds() -> float:
    """CPU seconds this process has used so far, all its threads, user and system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bare_encode(texts: list[str], batch: int) -> tuple[float, float, float]:
    """Seconds to load, to encode ``texts`` (wall) and its CPU seconds, torch at one thread."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    started = time.perf_counter()
    model = SentenceTransformer(default_model_path(), device="cpu")
    model.encode(["warm up"], batch_size=batch)
    loaded = time.perf_counter() - started
    started, cpu = time.perf_counter(), cpu_seconds()
    model.encode(texts, batch_size=batch, normalize_embeddings=True, show_progress_bar=False)
    return loaded, time.perf_counter() - started, cpu_seconds() - cpu


def demo_speedup(modules: int | None) -> dict[str, Any]:
    """Seconds to index the demo's chunks with the old torch default and with today's default."""
    from corrective_rag.cli.demo import STDLIB_MODULES, stdlib_documents
    from corrective_rag.models.embeddings import SentenceTransformerEmbedder
    from corrective_rag.store.hybrid import HybridStore

    docs = stdlib_documents(STDLIB_MODULES[:modules] if modules else STDLIB_MODULES)
    seconds = {}
    for name, embedder in (
        ("torch", SentenceTransformerEmbedder()),
        ("default", default_embedder()),
    ):
        embedder.embed(["load and warm the model"])
        with HybridStore.in_memory(embedder=embedder) as store:
            started = time.perf_counter()
            store.add(docs)
            seconds[name] = time.perf_counter() - started
    result = {
        "chunks": len(docs),
        "torch_seconds": round(seconds["torch"], 2),
        "default_seconds": round(seconds["default"], 2),
        "default_embedder": type(default_embedder()).__name__,
        "speedup": round(seconds["torch"] / seconds["default"], 2),
    }
    print(
        f"demo: {len(docs)} chunks, torch {seconds['torch']:.1f} s, default "
        f"{seconds['default']:.1f} s: {result['speedup']}x faster"
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", help="a BEIR folder (corpus.jsonl)")
    parser.add_argument("--demo", action="store_true", help="the demo's indexing, old vs new")
    parser.add_argument("--modules", type=int, help="with --demo: the first N stdlib modules")
    parser.add_argument("--limit", type=int, default=1000, help="documents (files) to index")
    parser.add_argument("--batch", type=int, default=32, help="the bare encode's batch size")
    parser.add_argument(
        "--busy", action="store_true", help="keep one core busy with a side process meanwhile"
    )
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args(argv)
    if args.limit <= 0:
        parser.error("--limit must be > 0")
    if args.demo:
        demo = {"machine": "loaded by other processes unless stated otherwise"}
        demo.update(demo_speedup(args.modules))
        write_json(args.json_out, demo)
        return 0
    if args.folder is None:
        parser.error("a BEIR folder is needed (or --demo)")
    if not os.path.isfile(os.path.join(args.folder, "corpus.jsonl")):
        print(f"no corpus.jsonl in {args.folder}", file=sys.stderr)
        return 2
    result: dict[str, Any] = {
        "machine": "loaded by other processes unless stated otherwise",
        "busy_core": args.busy,
        "cores": os.cpu_count(),
        "load_average_1min_before": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory(prefix="index-speed-") as tmp, busy_core(args.busy):
        files = Path(tmp) / "files"
        files.mkdir()
        result["files"] = write_files(args.folder, files, args.limit)
        texts = [d.text for d in read_paths(str(files))]
        result["chunks"] = len(texts)

        embedder: Any = default_embedder()
        started = time.perf_counter()
        embedder.embed(["export the model once, if this machine has not"])
        result["embedder"] = type(embedder).__name__
        result["first_use_seconds"] = round(time.perf_counter() - started, 2)
        result["exported_now"] = getattr(embedder, "exports", 0)

        store = str(Path(tmp) / "store")
        started, cpu = time.perf_counter(), cpu_seconds()
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli_main(["index", str(files), "--store", store, "--no-progress"])
        index_seconds = time.perf_counter() - started
        index_cpu = cpu_seconds() - cpu
        if code != 0:
            print(f"corrective-rag index exited with {code}", file=sys.stderr)
            return 1

        loaded, bare_seconds, bare_cpu = bare_encode(texts, args.batch)
    result.update(
        load_average_1min_after=round(os.getloadavg()[0], 2),
        index_seconds=round(index_seconds, 2),
        index_cpu_seconds=round(index_cpu, 2),
        bare_cpu_seconds=round(bare_cpu, 2),
        index_chunks_per_second=round(len(texts) / index_seconds, 1),
        bare_encode_seconds=round(bare_seconds, 2),
        bare_chunks_per_second=round(len(texts) / bare_seconds, 1),
        bare_load_seconds=round(loaded, 2),
        ratio=round(index_seconds / bare_seconds, 3),
        bare=f"SentenceTransformer.encode, torch, 1 thread, batch {args.batch}",
    )
    print(
        f"{result['chunks']} chunks from {result['files']} files: "
        f"index {index_seconds:.1f} s ({result['index_chunks_per_second']}/s, "
        f"{result['embedder']}), bare encode {bare_seconds:.1f} s "
        f"({result['bare_chunks_per_second']}/s): ratio {result['ratio']}"
    )
    write_json(args.json_out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
