"""HybridStore against a real chroma server started with ``chroma run`` on 127.0.0.1."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from corrective_rag.store.hybrid import HybridStore
from corrective_rag.types import Document

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def chroma_server(tmp_path):
    """A chroma server on a free port, stopped with SIGTERM afterwards."""
    chroma = shutil.which("chroma")
    if chroma is None:
        pytest.fail("the chroma command (from chromadb) is not on PATH")
    port = _free_port()
    proc = subprocess.Popen(
        [
            chroma,
            "run",
            "--path",
            str(tmp_path / "server"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                url = f"http://127.0.0.1:{port}/api/v2/heartbeat"
                with urllib.request.urlopen(url, timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"chroma server did not start (exit code {proc.poll()})")
                time.sleep(0.2)
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_store_over_http_keeps_both_legs(chroma_server, embedder) -> None:
    """Writes through a server-backed store are searchable, and a new connection rebuilds BM25."""
    docs = [
        Document("a", "Volcanoes erupt molten lava and ash.", {"topic": "geo"}),
        Document("b", "Glaciers carve valleys slowly over millennia.", {"topic": "geo"}),
        Document("c", "Violins have four strings tuned in fifths.", {"topic": "music"}),
        Document("d", "A sonata is a composition for one or two instruments.", {"topic": "music"}),
        Document("e", "Tides follow the pull of the Moon.", {"topic": "sea"}),
    ]
    with HybridStore.connect("127.0.0.1", chroma_server, embedder=embedder) as store:
        store.add(docs)
        store.delete(["e"])
        assert "a" == store.retrieve("lava eruption", top_k=2)[0].document.id
    with HybridStore.connect("127.0.0.1", chroma_server, embedder=embedder) as store:
        assert ["a", "b", "c", "d"] == sorted(store.ids())
        hits = store.retrieve("string instruments", top_k=4, where={"topic": "music"})
        assert {"c", "d"} == {h.document.id for h in hits}
        assert "c" == store.search("violins strings", leg="bm25")[0].document.id
