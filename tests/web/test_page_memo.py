"""Only a page's own failures are remembered: a page that one call's deadline cut off is fetched
again by the next call, while a 404 is asked once."""

from __future__ import annotations

import threading
import time

from fake_search import FakeSearchServer

from corrective_rag.web import PageFetcher, WebResult

TEXT = "Ganymede is the largest moon of Jupiter and of the Solar System."


def _fetcher() -> PageFetcher:
    return PageFetcher(allow_private=True, extract=lambda body, kind: body.decode())


def test_a_page_cut_off_by_the_callers_deadline_is_fetched_again():
    """The first call's deadline ends the held page; the next call, with time, gets its text."""
    with FakeSearchServer() as server:
        url = server.page("ganymede", TEXT, content_type="text/plain")
        server.page_gate = threading.Event()  # the page is held until the gate opens
        fetcher = _fetcher()
        results = [WebResult(url, "Ganymede", "snippet", "searxng")]
        assert [None] == fetcher.fetch(results, end=time.monotonic() + 0.3)
        server.page_gate.set()
        pages = fetcher.fetch(results)
        asked = [r for r in server.requests if r["path"] == "/pages/ganymede"]
    assert pages[0] is not None and TEXT in pages[0][0].text
    assert 2 == len(asked)


def test_a_pages_own_failure_is_remembered():
    """A 404 is the page's own answer: a second call asks nothing."""
    with FakeSearchServer() as server:
        missing = WebResult(f"{server.base_url}/pages/missing", "Missing", "snippet", "searxng")
        fetcher = _fetcher()
        assert [None] == fetcher.fetch([missing])
        assert [None] == fetcher.fetch([missing])
        asked = [r for r in server.requests if r["path"] == "/pages/missing"]
    assert 1 == len(asked)
