"""Download result pages and turn them into chunked documents, politely and safely.

A search snippet is often too short to judge; :class:`PageFetcher` downloads the top results'
pages and splits their text the way local files are split
(:func:`~corrective_rag.store.loaders.chunk_text`). A result's URL is chosen by someone else, so:

- only public addresses are connected to, checked after DNS on the address connected to, and
  every redirect hop is checked the same way (:mod:`corrective_rag.web.guard`); an intranet
  search opts in with ``allow_private=True`` or ``allow_networks``;
- redirects are followed here, one hop at a time, at most 5;
- one deadline bounds all pages of a call, body reads included (a server dripping one byte at a
  time is cut off), and the enclosing call scope (``Budget.max_seconds``, Ctrl-C) ends it too;
- a size cap (the body is read in pieces and dropped past the cap) and a content-type check
  (HTML, XHTML or plain text only); the text is cleaned (no NUL, control or invisible format
  characters) and the caller's secrets are masked before it is chunked;
- one connection per host at a time (different hosts in parallel), a User-Agent naming the
  package; a page is fetched once per URL, its outcome remembered for ``remember_seconds``
  (only the page's own: a page that one call's deadline cut off is fetched again by the next).

HTML becomes text through ``trafilatura`` (main-content extraction, dropping menus and footers),
installed with the ``web`` extra: ``pip install 'corrective_rag[web]'``. A page that cannot be
fetched or yields no text is skipped, and the caller keeps that result's snippet instead.
"""

from __future__ import annotations

import contextvars
import importlib.util
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

from corrective_rag.calls.body import read_capped
from corrective_rag.calls.settings import Timeouts, finite
from corrective_rag.errors import Cancelled, ConfigError, CorrectiveRAGError, SearchError
from corrective_rag.inputs import check_int
from corrective_rag.observe.logs import get_logger
from corrective_rag.store.loaders import DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP, chunk_text
from corrective_rag.text.secrets import redact
from corrective_rag.text.urls import URL_LOGGED, mask_url
from corrective_rag.types import Document
from corrective_rag.web.guard import check_networks, guarded_session
from corrective_rag.web.http import USER_AGENT
from corrective_rag.web.memo import Memo
from corrective_rag.web.results import (
    WebResult,
    canonical_url,
    clean,
    document_id,
    result_metadata,
    usable_url,
)
from corrective_rag.web.transfer import Transfer, TransferTimeout, bounded, end_of

# PageFetcher: its home is corrective_rag.web
__all__ = ["HTML_TYPES", "TEXT_TYPES", "html_to_text"]

log: Any = get_logger(__name__)

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
        deadline: seconds for all pages of one call together, body reads included.
        max_bytes: largest page body read.
        max_hosts: hosts fetched in parallel (each host gets one connection at a time).
        chunk_tokens: window size of the chunks, as for local files.
        overlap: tokens shared by consecutive chunks.
        session: a ``requests.Session``; by default one that ignores the environment's proxies
            and ``.netrc``. Unless ``allow_private``, the address guard is mounted on it.
        extract: ``(body, content_type) -> text or None``; default :func:`html_to_text`.
        allow_private: also fetch pages on loopback, private and link-local addresses (an
            intranet search). Off by default: a result must not make this machine read itself.
        allow_networks: networks allowed besides public addresses, e.g. ``("10.1.0.0/16",)``.
        remember_seconds: how long a page's outcome (text, or unusable) is reused for its URL;
            0 fetches every time.

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
        allow_private: bool = False,
        allow_networks: Sequence[str] = (),
        remember_seconds: float = 600.0,
    ) -> None:
        if not finite(deadline) or deadline <= 0:
            raise ConfigError(f"deadline must be a positive number of seconds, got {deadline!r}")
        check_int(max_bytes, "max_bytes", minimum=1024)
        check_int(max_hosts, "max_hosts", minimum=1)
        if extract is None and importlib.util.find_spec("trafilatura") is None:
            raise ConfigError(_MISSING)
        chunk_text("check", "check", chunk_tokens=chunk_tokens, overlap=overlap)  # validates
        if not isinstance(allow_private, bool):
            raise ConfigError(f"allow_private must be a bool, got {allow_private!r}")
        networks = check_networks(allow_networks)
        if not finite(remember_seconds) or remember_seconds < 0:
            raise ConfigError(f"remember_seconds must be >= 0, got {remember_seconds!r}")
        if session is None:
            session = guarded_session(allow_private=allow_private, allow_networks=allow_networks)
        elif not allow_private:  # a user's session (adapters, certificates) gets the guard too
            guarded = guarded_session(allow_networks=allow_networks)
            for prefix in ("http://", "https://"):
                session.mount(prefix, guarded.get_adapter(prefix))
        self.allow_private = allow_private
        self.allow_networks = networks
        self.timeouts: Timeouts = timeouts or Timeouts(connect=5.0, read=15.0)
        self.deadline: float = float(deadline)
        self.max_bytes = max_bytes
        self.max_hosts = max_hosts
        self.chunk_tokens = chunk_tokens
        self.overlap = overlap
        self._session = session
        self._extract = extract or html_to_text
        self._memo: Memo[str, str | None] = Memo(remember_seconds, 256)

    def __repr__(self) -> str:
        return (
            f"PageFetcher(max_bytes={self.max_bytes}, deadline={self.deadline:g}, "
            f"allow_private={self.allow_private})"
        )

    def fetch(
        self,
        results: Sequence[WebResult],
        *,
        end: float | None = None,
        secrets: Collection[str] = (),
    ) -> list[list[Document] | None]:
        """Each result's page as chunked documents, or None where it could not be used.

        Args:
            results: the results whose pages to fetch.
            end: a ``time.monotonic()`` by which to be done, if sooner than ``deadline``.
            secrets: strings masked in the pages' text before it is chunked (API keys).

        Raises:
            Cancelled: the enclosing call scope was cancelled.
        """
        ends, _ = end_of(self.deadline)
        if end is not None:
            ends = min(ends, end)
        by_host: dict[str, list[int]] = {}
        for index, result in enumerate(results):
            parts = urlsplit(result.url)
            by_host.setdefault(f"{parts.hostname}:{parts.port}", []).append(index)
        out: list[list[Document] | None] = [None] * len(results)

        def host_queue(indices: list[int]) -> None:
            for i in indices:  # one host, one page at a time: one connection per host
                out[i] = self._page(results[i], ends, secrets)

        queues = list(by_host.values())
        if len(queues) <= 1 or self.max_hosts == 1:
            for queue in queues:
                host_queue(queue)
        else:
            with ThreadPoolExecutor(max_workers=min(self.max_hosts, len(queues))) as pool:
                # each worker carries the caller's call scope (its deadline and cancellation)
                futures = [
                    pool.submit(contextvars.copy_context().run, host_queue, q) for q in queues
                ]
                for future in futures:
                    future.result()
        return out

    def _page(
        self, result: WebResult, ends: float, secrets: Collection[str]
    ) -> list[Document] | None:
        where = mask_url(result.url, URL_LOGGED)
        key = canonical_url(result.url)
        known, text = self._memo.get(key)
        if not known:
            if ends - time.monotonic() <= 0:
                log.info("page_skipped", url=where, reason="fetch deadline passed")
                return None
            text, own = self._text(result.url, ends)
            if own:  # unusable pages too, one try per page; never one this call's time cut off
                self._memo.put(key, text)
        if text is None:
            return None
        text = redact(text, secrets)
        body = f"{result.title}\n{text}" if result.title.strip() else text
        meta = {**result_metadata(result), "fetched": True}
        return chunk_text(
            document_id(result.url),
            body,
            meta,
            chunk_tokens=self.chunk_tokens,
            overlap=self.overlap,
        )

    def _text(self, url: str, ends: float) -> tuple[str | None, bool]:
        """The page's text or None (logged), and whether that outcome is the page's own.

        Only the page's own outcome is remembered. Not the page's own: a transfer this call's
        deadline ended (a later call with more time may get the page), and a timeout while the
        call had less time left than the page's own timeouts allow (the call's deadline may
        have been the limit).

        Raises only Cancelled and ConfigError: one bad page must not cost the others.
        """
        where = mask_url(url, URL_LOGGED)
        page_time = self.timeouts.connect + self.timeouts.read
        had = ends - time.monotonic()
        try:
            got = bounded(lambda transfer: self._download(transfer, url, ends), ends, where)
            if got is None:
                return None, True
            body, kind = got
            text = self._extract(body, kind)
        except (Cancelled, ConfigError):
            raise
        except TransferTimeout as exc:
            log.info("page_skipped", url=where, reason=f"{type(exc).__name__}: {exc}")
            return None, False
        except requests.Timeout as exc:
            log.info("page_skipped", url=where, reason=f"{type(exc).__name__}: {exc}")
            return None, had > page_time
        except (requests.RequestException, CorrectiveRAGError) as exc:
            log.info("page_skipped", url=where, reason=f"{type(exc).__name__}: {exc}")
            return None, True
        except Exception as exc:  # an extractor failing on hostile HTML: that page only
            log.warning("page_skipped", url=where, reason=f"{type(exc).__name__}: {exc}")
            return None, True
        text = clean(text).strip() if text else None
        if not text:
            log.info("page_skipped", url=where, reason="no text extracted")
        return text or None, True

    def _download(
        self, transfer: Transfer[tuple[bytes, str] | None], url: str, ends: float
    ) -> tuple[bytes, str] | None:
        """The body and content type of ``url``, or None (logged) where unusable.

        Redirects are followed here, hop by hop, each hop's address checked by the session's guard.
        """
        where = mask_url(url, URL_LOGGED)
        for _ in range(MAX_REDIRECTS + 1):
            left = max(0.001, ends - time.monotonic())
            response = self._session.get(
                url,
                headers={
                    "User-Agent": USER_AGENT,
                    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.8",
                },
                timeout=(min(self.timeouts.connect, left), min(self.timeouts.read, left)),
                stream=True,
                allow_redirects=False,  # each hop is checked here, never followed blindly
            )
            transfer.attach(response)
            try:
                if response.is_redirect:
                    url = urljoin(url, response.headers.get("Location", ""))
                    if not usable_url(url):
                        log.info("page_skipped", url=where, reason="redirect to an unusable URL")
                        return None
                    continue
                if response.status_code != 200:
                    log.info("page_skipped", url=where, reason=f"HTTP {response.status_code}")
                    return None
                kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
                if kind not in HTML_TYPES + TEXT_TYPES:
                    reason = f"content type {kind or 'missing'}"
                    log.info("page_skipped", url=where, reason=reason)
                    return None
                body = read_capped(response, self.max_bytes, lambda m: SearchError(f"{where}: {m}"))
                return body, kind
            finally:
                response.close()
        log.info("page_skipped", url=where, reason=f"more than {MAX_REDIRECTS} redirects")
        return None
