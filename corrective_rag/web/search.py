"""What every web-search retriever does around its provider's one API call.

:class:`WebSearchRetriever` checks the query and ``top_k``, masks secrets in the query, asks the
provider (a subclass's ``_search``) for results unless it asked that query moments ago, drops
repeated URLs, masks secrets in the results, optionally fetches the top pages, and returns ranked
:class:`~corrective_rag.types.Hit` s, all within one deadline. Subclasses only build the request
and read the provider's JSON.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

import requests

from corrective_rag.calls.settings import finite
from corrective_rag.errors import ConfigError, SearchError
from corrective_rag.inputs import check_int, check_query
from corrective_rag.observe.logs import get_logger
from corrective_rag.text.secrets import redact, secrets_of
from corrective_rag.types import Document, Hit
from corrective_rag.web.fetch import PageFetcher
from corrective_rag.web.http import JsonCaller, WebSettings
from corrective_rag.web.memo import Memo
from corrective_rag.web.results import WebResult, dedupe_by_url, ranked_hits, result_document
from corrective_rag.web.transfer import end_of

__all__ = ["WebSearchRetriever"]

log: Any = get_logger(__name__)


class WebSearchRetriever:
    """A :class:`~corrective_rag.protocols.Retriever` over a web-search API (see subclasses).

    Args:
        settings: timeouts, retries, total deadline and size cap of each search call.
        fetch_pages: download the top results' pages and use their text, chunked, instead of
            the snippets (needs the ``web`` extra unless ``fetcher`` has its own extractor).
        fetch_top: how many of the top results' pages to fetch.
        fetcher: the :class:`PageFetcher` to use; a default one is made when ``fetch_pages``.
        session: a ``requests.Session`` for the API calls (adapters, proxies).
        sleep: called with seconds to wait between tries (tests pass a recorder).
        rng: source of back-off jitter.
        secrets: more strings never to send nor return (other API keys: the CLI passes every
            key it knows); the provider's own key is always one.
        remember_seconds: how long a query's results are reused instead of asking again (one
            search per query per run); 0 asks every time.
    """

    provider = "web"
    max_count = 20  # results one call may ask for

    def __init__(
        self,
        *,
        settings: WebSettings | None = None,
        fetch_pages: bool = False,
        fetch_top: int = 3,
        fetcher: PageFetcher | None = None,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        secrets: Collection[str] = (),
        remember_seconds: float = 600.0,
    ) -> None:
        if settings is not None and not isinstance(settings, WebSettings):
            raise ConfigError(f"settings must be a WebSettings, got {settings!r}")
        if not isinstance(fetch_pages, bool):
            raise ConfigError(f"fetch_pages must be a bool, got {fetch_pages!r}")
        check_int(fetch_top, "fetch_top", minimum=1)
        if fetcher is not None and not isinstance(fetcher, PageFetcher):
            raise ConfigError(f"fetcher must be a PageFetcher, got {fetcher!r}")
        if fetch_pages and fetcher is None:
            fetcher = PageFetcher()  # raises ConfigError when trafilatura is missing
        if isinstance(secrets, str) or not all(isinstance(x, str) for x in secrets):
            raise ConfigError("secrets must be a collection of strings")
        if not finite(remember_seconds) or remember_seconds < 0:
            raise ConfigError(f"remember_seconds must be >= 0, got {remember_seconds!r}")
        self._secrets = secrets_of(secrets)
        self._memo: Memo[str, list[WebResult]] = Memo(remember_seconds, 256)
        self.settings: WebSettings = settings or WebSettings()
        self.fetch_pages = fetch_pages
        self.fetch_top = fetch_top
        self.fetcher: PageFetcher | None = fetcher if fetch_pages else None
        self._caller = JsonCaller(
            self.provider, self.settings, secrets=secrets, session=session, sleep=sleep, rng=rng
        )

    def retrieve(
        self, query: str, *, top_k: int = 10, where: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Search the web for ``query``; at most ``top_k`` hits, ranked 1..n.

        ``where`` filters on plain metadata equality (``{"provider": "tavily"}``). A secret in
        ``query`` is sent as ``***``; secrets in the results are masked the same way, and a
        result whose URL holds one is dropped. The search and the page fetches together end
        within ``settings.deadline`` (or the call scope's deadline, if sooner).

        Raises:
            InputError: the query is not usable text.
            ConfigError: ``top_k`` out of range, or ``where`` uses an operator.
            SearchError: the API failed after its retries or within its deadline
                (:class:`~corrective_rag.errors.SearchSkippedError`: not asked, the provider
                asked to wait).
            Cancelled: the enclosing call scope was cancelled.
        """
        query = check_query(query, what="query")
        # No upper bound: the loop asks for top_k plus every document already judged, and an
        # API returning fewer results than asked is normal.
        check_int(top_k, "top_k", minimum=1)
        if where is not None and not isinstance(where, Mapping):
            raise ConfigError(f"where must be a mapping or None, got {where!r}")
        end, _ = end_of(self.settings.deadline)
        sent = redact(query, self._secrets)
        if sent != query:
            log.warning("web_query_masked", provider=self.provider)
        results, found = self._results(sent)
        pages: list[list[Document] | None] = [None] * len(results)
        if self.fetcher is not None and results:
            top = results[: self.fetch_top]
            pages[: self.fetch_top] = self.fetcher.fetch(top, end=end, secrets=self._secrets)
        documents: list[list[Document]] = []
        for result, page in zip(results, pages, strict=True):
            if page:
                documents.append(page)
            elif (snippet := result_document(result)) is not None:
                documents.append([snippet])
        hits = ranked_hits(documents, top_k=top_k, where=where)
        log.info(
            "web_search",
            provider=self.provider,
            results=found,
            unique=len(results),
            fetched=sum(1 for p in pages if p),
            hits=len(hits),
        )
        return hits

    def _results(self, query: str) -> tuple[list[WebResult], int | None]:
        """The deduplicated, masked results for ``query``, and how many the API returned.

        The count is None when the results were remembered from an earlier call (nothing sent).
        """
        known, remembered = self._memo.get(query)
        if known and remembered is not None:
            return remembered, None
        try:
            # The API's maximum, whatever top_k: repeats and unusable URLs are dropped after the
            # call, a later iteration asking for more is answered from memory, and a search costs
            # the same per call whatever the count (Tavily and Brave bill per request).
            found = self._search(query, self.max_count)
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            raise SearchError(
                f"{self.provider}: answer does not have the documented shape "
                f"({type(exc).__name__}: {exc})"
            ) from None
        masked = [self._masked(r) for r in dedupe_by_url(found)]
        results = [r for r in masked if r is not None]
        self._memo.put(query, results)
        return results, len(found)

    def _masked(self, result: WebResult) -> WebResult | None:
        """``result`` with secrets masked; None if its URL holds one (it cannot be cited)."""
        if redact(result.url, self._secrets) != result.url:
            return None
        title, snippet = (redact(t, self._secrets) for t in (result.title, result.snippet))
        return WebResult(result.url, title, snippet, result.provider)

    def _listed(self, value: object) -> list[dict[str, Any]]:
        """The result objects with a URL in a JSON list; SearchError when it is not a list."""
        if not isinstance(value, list):
            raise SearchError(
                f"{self.provider}: answer does not have the documented shape "
                f"(results is {type(value).__name__}, not a list)"
            )
        return [r for r in value if isinstance(r, dict) and isinstance(r.get("url"), str)]

    def _search(self, query: str, count: int) -> list[WebResult]:
        """The provider's results for ``query``, best first (at most about ``count``)."""
        raise NotImplementedError
