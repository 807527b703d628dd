"""Brave's Web Search API: a hosted, independent index with a free tier.

Modelled on Brave's documented Web Search API v1 (``api-dashboard.search.brave.com``,
"Web Search API" reference, 2024-2025): ``GET {base}/res/v1/web/search?q=...&count=N`` with
``Accept: application/json`` and ``X-Subscription-Token: KEY``. The answer::

    {"type": "search", "query": {"original": "..."},
     "web": {"type": "search",
             "results": [{"title": "...", "url": "...", "description": "... <strong>hit</strong>",
                          "extra_snippets": ["..."], "age": "...", "language": "en", ...}]},
     "mixed": {...}, "news": {...}, "videos": {...}}

``web.results[].url``, ``title``, ``description`` and ``extra_snippets`` are read (highlight
tags removed); ``web`` is absent when nothing was found. Errors are
``{"type": "ErrorResponse", "error": {"id": "...", "status": 422, "code": "...", "detail": "..."},
"time": ...}``: 401/422 for a bad token or parameters, 429 when a rate window is exhausted (with
``X-RateLimit-Limit``/``-Remaining``/``-Reset`` listing the per-second and per-month windows and
no ``Retry-After``). ``count`` is at most 20; ``q`` at most 400 characters and 50 words.
"""

from __future__ import annotations

from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.observe.logs import get_logger
from corrective_rag.web.http import check_base_url, check_key
from corrective_rag.web.results import WebResult, plain
from corrective_rag.web.search import WebSearchRetriever

# BraveRetriever: its home is corrective_rag.web
__all__ = ["BRAVE_URL", "fit_query"]

log: Any = get_logger(__name__)

BRAVE_URL = "https://api.search.brave.com"
MAX_QUERY_CHARS = 400  # Brave's documented limits on q
MAX_QUERY_WORDS = 50
_SAFESEARCH = ("off", "moderate", "strict")


def fit_query(query: str) -> str:
    """``query`` cut to Brave's limits (400 characters, 50 words) at a word boundary."""
    words = query.split()[:MAX_QUERY_WORDS]
    while words and len(" ".join(words)) > MAX_QUERY_CHARS:
        words.pop()
    return " ".join(words) or query[:MAX_QUERY_CHARS]


class BraveRetriever(WebSearchRetriever):
    """Web search through Brave's Web Search API (see the module docstring).

    Args:
        api_key: the subscription token; never logged nor shown. The library reads no
            environment variable: the CLI passes ``BRAVE_API_KEY``.
        base_url: the API root (a proxy, or a local fake in tests).
        country: two-letter country code, e.g. ``"us"``; None: Brave's default.
        search_lang: language code, e.g. ``"en"``; None: Brave's default.
        safesearch: ``"off"``, ``"moderate"`` or ``"strict"``; None: Brave's default.
        extra_snippets: also read up to 5 extra snippets per result (some plans only).
        **options: see :class:`~corrective_rag.web.search.WebSearchRetriever`.

    Raises:
        ConfigError: on any invalid argument (the key itself is never shown).
    """

    provider = "brave"
    max_count = 20

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = BRAVE_URL,
        country: str | None = None,
        search_lang: str | None = None,
        safesearch: str | None = None,
        extra_snippets: bool = False,
        **options: Any,
    ) -> None:
        self._api_key = check_key(api_key, "api_key")
        self.base_url: str = check_base_url(base_url)
        if safesearch is not None and safesearch not in _SAFESEARCH:
            raise ConfigError(f"safesearch must be one of {_SAFESEARCH}, got {safesearch!r}")
        for name, value in (("country", country), ("search_lang", search_lang)):
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
        if not isinstance(extra_snippets, bool):
            raise ConfigError(f"extra_snippets must be a bool, got {extra_snippets!r}")
        super().__init__(secrets=(self._api_key, *options.pop("secrets", ())), **options)
        self.params: dict[str, Any] = {}
        for name, value in (
            ("country", country),
            ("search_lang", search_lang),
            ("safesearch", safesearch),
        ):
            if value is not None:
                self.params[name] = value
        if extra_snippets:
            self.params["extra_snippets"] = "true"

    def __repr__(self) -> str:
        return f"BraveRetriever(base_url={self.base_url!r}, api_key=***)"

    def _search(self, query: str, count: int) -> list[WebResult]:
        q = fit_query(query)
        if q != query:
            log.info("brave_query_cut", chars=len(query), sent_chars=len(q))
        data = self._caller.call(
            "GET",
            f"{self.base_url}/res/v1/web/search",
            params={"q": q, "count": count, **self.params},
            headers={"X-Subscription-Token": self._api_key},
        )
        web = data.get("web") or {}
        out = []
        for r in self._listed(web.get("results", [])):
            extra = r.get("extra_snippets") or []
            snippets = [plain(r.get("description"))]
            snippets += [plain(s) for s in extra if isinstance(s, str)]
            text = " ".join(s for s in snippets if s)
            out.append(WebResult(r["url"], plain(r.get("title")), text, self.provider))
        return out
