"""Web search as a :class:`~corrective_rag.protocols.Retriever`, for CRAG's fallback.

Three providers (:class:`SearxngRetriever`, :class:`TavilyRetriever`, :class:`BraveRetriever`)
return :class:`~corrective_rag.types.Hit` s whose documents carry the result's title and text, with
metadata ``url``, ``title``, ``provider`` and ``source: "web"``; the document id is the URL.
``fetch_pages=True`` replaces the top snippets by the pages' own text (:class:`PageFetcher`,
the ``web`` extra). See docs/fallback.md.
"""

from corrective_rag.web.brave import BraveRetriever
from corrective_rag.web.fetch import PageFetcher
from corrective_rag.web.http import WebSettings
from corrective_rag.web.results import WebResult
from corrective_rag.web.searxng import SearxngRetriever
from corrective_rag.web.tavily import TavilyRetriever

__all__ = [
    "BraveRetriever",
    "PageFetcher",
    "SearxngRetriever",
    "TavilyRetriever",
    "WebResult",
    "WebSettings",
]
