"""Page fetching for web results: main text chunked like files, bounded, polite, and falling back
to the snippet when a page cannot be used. The pages are on 127.0.0.1, so every fetcher here opts
in with allow_private=True (tests/web/test_web_boundary.py proves the default refuses)."""

from __future__ import annotations

import sys
import threading

import pytest
from fake_search import FakeSearchServer

from corrective_rag.errors import ConfigError
from corrective_rag.web import PageFetcher, SearxngRetriever, WebResult

ARTICLE = """<html><head><title>Aspirin - Example</title></head><body>
<nav>Home | About | Contact | Donate</nav>
<article><h1>Aspirin</h1>
<p>Aspirin, also known as acetylsalicylic acid, is a medication used to reduce pain, fever and
inflammation. Felix Hoffmann at Bayer synthesised a pure form of it in 1897.</p>
<p>Low doses of aspirin are taken to prevent heart attacks and strokes in people at high risk.</p>
</article><footer>Copyright Example Foundation. All rights reserved.</footer></body></html>"""


def test_fetched_pages_replace_snippets_with_main_text_chunked_like_files() -> None:
    """A fetched HTML page becomes URL#N chunks of its main text (menus and footers dropped)."""
    with FakeSearchServer() as server:
        url = server.page("aspirin", ARTICLE)
        server.results = [{"url": url, "title": "Aspirin", "content": "short snippet"}]
        fetcher = PageFetcher(chunk_tokens=32, overlap=4, allow_private=True)
        hits = SearxngRetriever(server.base_url, fetch_pages=True, fetcher=fetcher).retrieve(
            "aspirin", top_k=10
        )
        page_request = next(r for r in server.requests if r["path"] == "/pages/aspirin")
    ids = [h.document.id for h in hits]
    assert [f"{url}#{i}" for i in range(len(hits))] == ids
    assert len(hits) >= 2
    text = " ".join(h.document.text for h in hits)
    assert "Felix Hoffmann" in text
    assert "Donate" not in text and "Copyright" not in text
    assert hits[0].document.text.startswith("Aspirin\n")
    meta = hits[0].document.metadata
    assert (url, "web", True, 0) == (meta["url"], meta["source"], meta["fetched"], meta["chunk"])
    assert page_request["headers"]["User-Agent"].startswith("corrective_rag/")


def test_unusable_pages_fall_back_to_their_snippets() -> None:
    """A 404, a PDF and a page past the size cap each keep the result's snippet."""
    with FakeSearchServer() as server:
        pdf = server.page("paper.pdf", b"%PDF-1.7 binary", content_type="application/pdf")
        big = server.page("big", "<html><body><p>" + "word " * 2000 + "</p></body></html>")
        missing = f"{server.base_url}/pages/missing"
        server.results = [
            {"url": u, "title": t, "content": f"{t} snippet"}
            for u, t in ((missing, "Missing"), (pdf, "Paper"), (big, "Big"))
        ]
        retriever = SearxngRetriever(
            server.base_url,
            fetch_pages=True,
            fetch_top=3,
            fetcher=PageFetcher(max_bytes=2048, allow_private=True),
        )
        hits = retriever.retrieve("anything", top_k=10)
    assert [missing, pdf, big] == [h.document.id for h in hits]
    assert ["Missing\nMissing snippet", "Paper\nPaper snippet", "Big\nBig snippet"] == [
        h.document.text for h in hits
    ]
    assert all("fetched" not in h.document.metadata for h in hits)


def test_only_the_top_results_are_fetched_and_chunks_interleave() -> None:
    """fetch_top pages are fetched; every result's first chunk ranks before any second chunk."""
    page = "<html><body><article>" + "<p>Aspirin lowers fever in adults and children.</p>" * 40
    with FakeSearchServer() as server:
        first = server.page("one", page + "</article></body></html>")
        second = server.page("two", page + "</article></body></html>")
        server.results = [
            {"url": first, "title": "One", "content": "one"},
            {"url": second, "title": "Two", "content": "two"},
        ]
        retriever = SearxngRetriever(
            server.base_url,
            fetch_pages=True,
            fetch_top=1,
            fetcher=PageFetcher(chunk_tokens=64, allow_private=True),
        )
        hits = retriever.retrieve("aspirin", top_k=3)
        fetched = [r["path"] for r in server.requests if r["path"].startswith("/pages/")]
    assert ["/pages/one"] == fetched
    assert [f"{first}#0", second, f"{first}#1"] == [h.document.id for h in hits]


def test_one_connection_per_host_and_hosts_in_parallel() -> None:
    """Two pages of one host are fetched one after the other while another host's page is too."""
    with FakeSearchServer() as server:
        a1 = server.page("a1", ARTICLE)
        a2 = server.page("a2", ARTICLE)
        b1 = server.page("b1", ARTICLE).replace("127.0.0.1", "localhost")
        server.page_gate = threading.Event()
        results = [WebResult(u, "Aspirin", "s", "test") for u in (a1, a2, b1)]
        out: list[object] = []
        worker = threading.Thread(
            target=lambda: out.append(PageFetcher(allow_private=True).fetch(results))
        )
        worker.start()
        # Both hosts' first pages arrive while the server holds every answer: hosts in parallel.
        assert server.page_waiting.acquire(timeout=60)
        assert server.page_waiting.acquire(timeout=60)
        server.page_gate.set()
        worker.join()
    assert 2 == server.max_in_flight  # never a second connection to 127.0.0.1
    (pages,) = out
    assert all(p for p in pages)  # type: ignore[attr-defined]


def test_fetching_without_the_web_extra_is_a_clear_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without trafilatura, fetch_pages=True fails at construction naming the extra."""
    monkeypatch.setitem(sys.modules, "trafilatura", None)
    with pytest.raises(ConfigError, match=r"corrective_rag\[web\]"):
        SearxngRetriever("http://127.0.0.1:9", fetch_pages=True)


def test_plain_text_pages_are_used_as_they_are() -> None:
    """A text/plain page needs no HTML extraction and is chunked the same way."""
    with FakeSearchServer() as server:
        url = server.page(
            "notes.txt", "Aspirin was first made in 1897.", "text/plain; charset=utf-8"
        )
        server.results = [{"url": url, "title": "Notes", "content": "snippet"}]
        fetcher = PageFetcher(allow_private=True)
        (hit,) = SearxngRetriever(server.base_url, fetch_pages=True, fetcher=fetcher).retrieve(
            "aspirin"
        )
    assert (f"{url}#0", "Notes\nAspirin was first made in 1897.") == (
        hit.document.id,
        hit.document.text,
    )
