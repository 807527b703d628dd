"""Download result pages and turn them into chunked documents, politely.

A search snippet is often too short to judge; :class:`PageFetcher` downloads the top results'
pages and splits their text the way local files are split
(:func:`~corrective_rag.store.loaders.chunk_text`). Polite and bounded:

- one connection per host at a time (pages of one host are fetched one after another; different
  hosts in parallel), a User-Agent naming the package, at most 5 redirects;
- a connect and a read timeout per page and one deadline for all pages together;
- a size cap (the body is read in pieces and dropped past the cap) and a content-type check
  (HTML, XHTML or plain text only).

HTML becomes text through ``trafilatura`` (main-content extraction, dropping menus and footers),
installed with the ``web`` extra: ``pip install 'corrective_rag[web]'``. A page that cannot be
fetched or yields no text is skipped, and the caller keeps that result's snippet instead.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import requests

from corrective_rag.errors import ConfigError, CorrectiveRAGError
from corrective_rag.inputs import check_int
from corrective_rag.llm.settings import Timeouts, finite
from corrective_rag.logs import get_logger
from corrective_rag.store.loaders import DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP, chunk_text
from corrective_rag.types import Document
from corrective_rag.web.http import USER_AGENT, read_capped, shown_url
from corrective_rag.web.results import WebResult, document_id, result_metadata

__all__ = ["HTML_TYPES", "TEXT_TYPES", "PageFetcher", "html_to_text"]

log = get_logger(__name__)

HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/plain",)
MAX_REDIRECTS = 5  # enough for http->https->www->canonical; more is a loop or a tracker chain

Extract = Callable[[bytes, str], "str | None"]


def html_to_text(body: bytes, content_type: str) -> str | None:
    """The main text of an HTML page (trafilatura), or a plain-text body decoded; None if empty.

    Raises:
        ConfigError: trafilatura is not installed (the ``web`` extra).
    """
    if content_type in TEXT_TYPES:
        return body.decode("utf-8", "replace").strip() or None
    try:
        import trafilatura
    except ImportError as exc:
        raise ConfigError(_MISSING) from exc
    text: Any = trafilatura.extract(body, include_comments=False, include_tables=True)
    return text.strip() or None if isinstance(text, str) else None


_MISSING = (
    "fetching pages needs trafilatura to turn HTML into text: pip install 'corrective_rag[web]'"
)


class PageFetcher:
    """Fetches result pages and returns each as chunked documents (see the module docstring).

    Args:
        timeouts: connect and read timeout per page.
        deadline: seconds for all pages of one call together.
        max_bytes: largest page body read.
        max_hosts: hosts fetched in parallel (each host gets one connection at a time).
        chunk_tokens: window size of the chunks, as for local files.
        overlap: tokens shared by consecutive chunks.
        session: a ``requests.Session``; one is made lazily if None.
        extract: ``(body, content_type) -> text or None``; default :func:`html_to_text`.
        clock: monotonic seconds, for the deadline.

    Raises:
        ConfigError: a setting out of range, or trafilatura missing with the default extractor.
    """

    def __init__(
        self,
        *,
        timeouts: Timeouts | None = None,
        deadline: float = 30.0,
        max_bytes: int = 2_000_000,
        max_hosts: int = 4,
        chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
        overlap: int = DEFAULT_OVERLAP,
        session: requests.Session | None = None,
        extract: Extract | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not finite(deadline) or deadline <= 0:
            raise ConfigError(f"deadline must be a positive number of seconds, got {deadline!r}")
        check_int(max_bytes, "max_bytes", minimum=1024)
        check_int(max_hosts, "max_hosts", minimum=1)
        if extract is None and importlib.util.find_spec("trafilatura") is None:
            raise ConfigError(_MISSING)
        chunk_text("check", "check", chunk_tokens=chunk_tokens, overlap=overlap)  # validates
        self.timeouts = timeouts or Timeouts(connect=5.0, read=15.0)
        self.deadline = float(deadline)
        self.max_bytes = max_bytes
        self.max_hosts = max_hosts
        self.chunk_tokens = chunk_tokens
        self.overlap = overlap
        self._session = session
        self._extract = extract or html_to_text
        self._clock = clock
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PageFetcher(max_bytes={self.max_bytes}, deadline={self.deadline:g})"

    def fetch(self, results: Sequence[WebResult]) -> list[list[Document] | None]:
        """Each result's page as chunked documents, or None where it could not be used."""
        with self._lock:
            if self._session is None:
                self._session = requests.Session()
                self._session.max_redirects = MAX_REDIRECTS
        ends = self._clock() + self.deadline
        by_host: dict[str, list[int]] = {}
        for index, result in enumerate(results):
            parts = urlsplit(result.url)
            by_host.setdefault(f"{parts.hostname}:{parts.port}", []).append(index)
        out: list[list[Document] | None] = [None] * len(results)

        def host_queue(indices: list[int]) -> None:
            for i in indices:  # one host, one page at a time: one connection per host
                out[i] = self._page(results[i], ends)

        queues = list(by_host.values())
        if len(queues) <= 1 or self.max_hosts == 1:
            for queue in queues:
                host_queue(queue)
        else:
            with ThreadPoolExecutor(max_workers=min(self.max_hosts, len(queues))) as pool:
                for future in [pool.submit(host_queue, q) for q in queues]:
                    future.result()
        return out

    def _page(self, result: WebResult, ends: float) -> list[Document] | None:
        where = shown_url(result.url)
        left = ends - self._clock()
        if left <= 0:
            log.info("page_skipped", url=where, reason="fetch deadline passed")
            return None
        try:
            text = self._download(result.url, left)
        except (requests.RequestException, CorrectiveRAGError) as exc:
            if isinstance(exc, ConfigError):
                raise
            log.info("page_skipped", url=where, reason=f"{type(exc).__name__}: {exc}")
            return None
        if text is None:
            return None
        body = f"{result.title}\n{text}" if result.title.strip() else text
        meta = {**result_metadata(result), "fetched": True}
        return chunk_text(
            document_id(result.url),
            body,
            meta,
            chunk_tokens=self.chunk_tokens,
            overlap=self.overlap,
        )

    def _download(self, url: str, left: float) -> str | None:
        assert self._session is not None  # set in fetch()
        where = shown_url(url)
        response = self._session.get(
            url,
            headers={
                "User-Agent": USER_AGENT,
                "Accept": "text/html,application/xhtml+xml,text/plain;q=0.8",
            },
            timeout=(min(self.timeouts.connect, left), min(self.timeouts.read, left)),
            stream=True,
        )
        try:
            if response.status_code != 200:
                log.info("page_skipped", url=where, reason=f"HTTP {response.status_code}")
                return None
            kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if kind not in HTML_TYPES + TEXT_TYPES:
                log.info("page_skipped", url=where, reason=f"content type {kind or 'missing'}")
                return None
            body = read_capped(response, self.max_bytes, where)
        finally:
            response.close()
        text = self._extract(body, kind)
        if not text:
            log.info("page_skipped", url=where, reason="no text extracted")
        return text or None
