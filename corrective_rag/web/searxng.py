"""SearxNG's JSON search API: free, self-hosted, a common web search for local setups.

Modelled on SearxNG's documented search API (``docs.searxng.org/dev/search_api.html``), as served
by SearxNG 2023.x-2025.x: ``GET {base}/search?q=...&format=json&pageno=1`` with optional
``categories``, ``engines``, ``language``, ``safesearch`` and ``time_range``. The answer::

    {"query": "...", "number_of_results": 0,
     "results": [{"url": "...", "title": "...", "content": "...", "engine": "...",
                  "engines": ["..."], "score": 1.0, "category": "general", ...}],
     "answers": [], "corrections": [], "infoboxes": [], "suggestions": [],
     "unresponsive_engines": [["engine", "timeout"]]}

``results[].url``, ``title`` and ``content`` are read; the rest is ignored. An instance answers
403 when ``json`` is not among ``search.formats`` in its ``settings.yml`` (the default), and 429
when its limiter refuses a client. It returns one page of results (about 10-20) whatever is
asked, so ``top_k`` cuts the page.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from corrective_rag.errors import ConfigError, SearchError
from corrective_rag.observe.logs import get_logger
from corrective_rag.web.http import check_base_url
from corrective_rag.web.results import WebResult, plain
from corrective_rag.web.search import WebSearchRetriever

# SearxngRetriever: its home is corrective_rag.web
__all__: list[str] = []

log: Any = get_logger(__name__)

_SAFESEARCH = (0, 1, 2)
_TIME_RANGES = (None, "day", "week", "month", "year")


class SearxngRetriever(WebSearchRetriever):
    """Web search through a SearxNG instance (see the module docstring).

    Args:
        base_url: the instance, e.g. ``http://127.0.0.1:8888``.
        categories: SearxNG categories, e.g. ``("general",)``; None: the instance's default.
        engines: engine names to ask; None: the instance's default.
        language: e.g. ``"en"``; None: the instance's default.
        safesearch: 0 (off), 1 (moderate) or 2 (strict); None: the instance's default.
        time_range: ``"day"``, ``"week"``, ``"month"``, ``"year"`` or None.
        **options: see :class:`~corrective_rag.web.search.WebSearchRetriever`.

    Raises:
        ConfigError: on any invalid argument.
    """

    provider = "searxng"

    def __init__(
        self,
        base_url: str,
        *,
        categories: tuple[str, ...] | None = None,
        engines: tuple[str, ...] | None = None,
        language: str | None = None,
        safesearch: int | None = None,
        time_range: str | None = None,
        **options: Any,
    ) -> None:
        self.base_url: str = check_base_url(base_url)
        if safesearch is not None and safesearch not in _SAFESEARCH:
            raise ConfigError(f"safesearch must be 0, 1 or 2, got {safesearch!r}")
        if time_range not in _TIME_RANGES:
            raise ConfigError(f"time_range must be one of {_TIME_RANGES}, got {time_range!r}")
        for name, value in (("categories", categories), ("engines", engines)):
            if value is not None and (
                isinstance(value, str) or not all(isinstance(v, str) and v for v in value)
            ):
                raise ConfigError(f"{name} must be a tuple of names, got {value!r}")
        if language is not None and (not isinstance(language, str) or not language):
            raise ConfigError(f"language must be a non-empty string, got {language!r}")
        password = urlsplit(self.base_url).password
        extra = tuple(options.pop("secrets", ()))
        super().__init__(secrets=((password,) if password else ()) + extra, **options)
        self.params: dict[str, Any] = {"format": "json", "pageno": 1}
        if categories:
            self.params["categories"] = ",".join(categories)
        if engines:
            self.params["engines"] = ",".join(engines)
        if language:
            self.params["language"] = language
        if safesearch is not None:
            self.params["safesearch"] = safesearch
        if time_range:
            self.params["time_range"] = time_range

    def __repr__(self) -> str:
        return f"SearxngRetriever(base_url={self._caller.redact(self.base_url)!r})"

    def _search(self, query: str, count: int) -> list[WebResult]:
        try:
            data = self._caller.call(
                "GET", f"{self.base_url}/search", params={"q": query, **self.params}
            )
        except SearchError as exc:
            if exc.status == 403:
                raise SearchError(
                    f"{exc} (a SearxNG instance answers 403 to format=json unless 'json' is "
                    "listed under search.formats in its settings.yml)",
                    status=exc.status,
                ) from None
            raise
        unresponsive = data.get("unresponsive_engines") or []
        if unresponsive:  # the results may be thin: say which engines did not answer
            log.info("searxng_unresponsive_engines", engines=[str(e) for e in unresponsive][:10])
        # One page whatever ``count`` asks: all of it is kept, repeats go, top_k cuts.
        return [
            WebResult(r["url"], plain(r.get("title")), plain(r.get("content")), self.provider)
            for r in self._listed(data["results"])
        ]
