"""Tavily's search API: a hosted web search made for RAG, paid per call after a free tier.

Modelled on Tavily's documented REST API (``docs.tavily.com``, API reference "Tavily Search",
2024-2025): ``POST {base}/search`` with ``Authorization: Bearer tvly-...`` and a JSON body::

    {"query": "...", "max_results": 5, "search_depth": "basic", "topic": "general",
     "include_answer": false, "include_raw_content": false, "include_images": false,
     "include_domains": [], "exclude_domains": []}

answered by::

    {"query": "...", "answer": null, "images": [], "follow_up_questions": null,
     "results": [{"title": "...", "url": "...", "content": "...", "score": 0.98,
                  "raw_content": null}],
     "response_time": 1.09}

``results[].url``, ``title`` and ``content`` are read. Errors, as documented: 400 (bad
parameters), 401 (missing or invalid key), 429 (rate limit; retried), 432 / 433 (plan or
pay-as-you-go limit: not retried), 5xx (retried); their body is ``{"detail": {"error": "..."}}``.
``max_results`` is 0..20; a "basic" search costs 1 API credit, an "advanced" one 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.web.http import check_base_url, check_key
from corrective_rag.web.results import WebResult, plain
from corrective_rag.web.search import WebSearchRetriever

# TavilyRetriever: its home is corrective_rag.web
__all__ = ["TAVILY_URL"]

TAVILY_URL = "https://api.tavily.com"
_DEPTHS = ("basic", "advanced")
_TOPICS = ("general", "news")


class TavilyRetriever(WebSearchRetriever):
    """Web search through Tavily (see the module docstring).

    Args:
        api_key: the Tavily key (``tvly-...``); never logged nor shown. The library reads no
            environment variable: the CLI passes ``TAVILY_API_KEY``.
        base_url: the API root (a proxy, or a local fake in tests).
        search_depth: ``"basic"`` (1 credit) or ``"advanced"`` (2 credits).
        topic: ``"general"`` or ``"news"``.
        include_domains: only these domains; empty: any.
        exclude_domains: never these domains.
        **options: see :class:`~corrective_rag.web.search.WebSearchRetriever`.

    Raises:
        ConfigError: on any invalid argument (the key itself is never shown).
    """

    provider = "tavily"
    max_count = 20

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = TAVILY_URL,
        search_depth: str = "basic",
        topic: str = "general",
        include_domains: Sequence[str] = (),
        exclude_domains: Sequence[str] = (),
        **options: Any,
    ) -> None:
        self._api_key = check_key(api_key, "api_key")
        self.base_url: str = check_base_url(base_url)
        if search_depth not in _DEPTHS:
            raise ConfigError(f"search_depth must be one of {_DEPTHS}, got {search_depth!r}")
        if topic not in _TOPICS:
            raise ConfigError(f"topic must be one of {_TOPICS}, got {topic!r}")
        for name, value in (
            ("include_domains", include_domains),
            ("exclude_domains", exclude_domains),
        ):
            if isinstance(value, str) or not all(isinstance(d, str) and d for d in value):
                raise ConfigError(f"{name} must be a sequence of domain names, got {value!r}")
        super().__init__(secrets=(self._api_key, *options.pop("secrets", ())), **options)
        self.body: dict[str, Any] = {
            "search_depth": search_depth,
            "topic": topic,
            "include_answer": False,
            "include_raw_content": False,
            "include_images": False,
        }
        if include_domains:
            self.body["include_domains"] = list(include_domains)
        if exclude_domains:
            self.body["exclude_domains"] = list(exclude_domains)

    def __repr__(self) -> str:
        return f"TavilyRetriever(base_url={self.base_url!r}, api_key=***)"

    def _search(self, query: str, count: int) -> list[WebResult]:
        data = self._caller.call(
            "POST",
            f"{self.base_url}/search",
            payload={"query": query, "max_results": count, **self.body},
            headers={"Authorization": f"Bearer {self._api_key}"},
        )
        return [
            WebResult(r["url"], plain(r.get("title")), plain(r.get("content")), self.provider)
            for r in self._listed(data["results"])
        ]
