"""Search results as values, and the pure steps from results to hits.

A provider's JSON becomes a list of :class:`WebResult` whose text is :func:`clean` (no NUL,
control or invisible format characters: text from the web is untrusted);
:func:`dedupe_by_url` drops repeats (the
same page under ``http``/``https``, with a ``#fragment``, a trailing slash or an upper-case host);
:func:`result_document` turns a result into a :class:`~corrective_rag.types.Document` whose id
is its URL and whose metadata says ``source: "web"``; :func:`ranked_hits` filters and ranks.
"""

from __future__ import annotations

import hashlib
import html
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from corrective_rag.errors import ConfigError
from corrective_rag.types import MAX_ID_LENGTH, Document, Hit

# WebResult: its home is corrective_rag.web
__all__ = [
    "canonical_url",
    "clean",
    "dedupe_by_url",
    "document_id",
    "matches",
    "plain",
    "ranked_hits",
    "result_document",
]

_HIGHLIGHT = re.compile(r"</?(?:strong|b|em|i|mark|span)(?:\s[^<>]*)?>", re.IGNORECASE)
_KEEP = frozenset("\n\t")


@dataclass(frozen=True, slots=True)
class WebResult:
    """One search result: where it is, what it is called, and the provider's snippet."""

    url: str
    title: str
    snippet: str
    provider: str


def clean(text: str) -> str:
    """``text`` without NUL, control (C0, C1) or invisible format characters, nor lone surrogates.

    Line breaks and tabs stay (CR LF and a lone CR become LF). Format characters (soft
    hyphen, zero-width spaces and joiners, bidirectional overrides, BOM) are invisible on screen
    and split words for a judge or a filter; a web page has no business sending them.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "".join(
        ch for ch in text if ch in _KEEP or unicodedata.category(ch) not in ("Cc", "Cf", "Cs")
    )


def plain(text: object) -> str:
    """A snippet as clean plain text: highlight tags gone, entities decoded, spaces collapsed."""
    if not isinstance(text, str):
        return ""
    return " ".join(clean(html.unescape(_HIGHLIGHT.sub("", text))).split())


def usable_url(url: str) -> bool:
    """Whether ``url`` is http(s) with a host and holds no space, control or format character."""
    if any(ord(ch) <= 32 or unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in url):
        return False
    try:
        parts = urlsplit(url)
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # an unbalanced IPv6 bracket, a bad port
        return False


def canonical_url(url: str) -> str:
    """The form two URLs of one page share, for finding repeats.

    https, a lower-case host, no default port, fragment or trailing slash; the query string
    stays (it often names the page).
    """
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    if parts.port and parts.port not in (80, 443):
        host = f"{host}:{parts.port}"
    path = parts.path.rstrip("/") or ""
    return urlunsplit(("https", host, path, parts.query, ""))


def dedupe_by_url(results: Iterable[WebResult]) -> list[WebResult]:
    """``results`` without later repeats of a page (see :func:`canonical_url`), order kept.

    Results whose URL is not :func:`usable_url` are dropped: they cannot be fetched or cited.
    """
    seen: set[str] = set()
    out = []
    for result in results:
        if not usable_url(result.url):
            continue
        key = canonical_url(result.url)
        if key not in seen:
            seen.add(key)
            out.append(result)
    return out


def document_id(url: str) -> str:
    """A document id for ``url``: the URL without its ``#fragment``, cut if very long.

    A fragment (text fragments included) names a place in the same page, so the same page found
    by two queries gets one id; a URL too long for an id keeps its start and gains a hash.
    """
    url = url.split("#", 1)[0]
    if len(url) <= MAX_ID_LENGTH - 8:  # room for a "#N" chunk suffix
        return url
    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    return f"{url[: MAX_ID_LENGTH - 40]}~{digest}"


def result_metadata(result: WebResult) -> dict[str, Any]:
    """What every web document carries: its URL, title, provider and ``source: "web"``."""
    return {"url": result.url, "title": result.title, "source": "web", "provider": result.provider}


def result_document(result: WebResult) -> Document | None:
    """The result's title and snippet as one document, or None when both are empty."""
    text = "\n".join(part for part in (result.title, result.snippet) if part.strip())
    if not text.strip():
        return None
    return Document(document_id(result.url), text, result_metadata(result))


def matches(metadata: Mapping[str, Any], where: Mapping[str, Any] | None) -> bool:
    """Whether ``metadata`` equals ``where`` on every key (the only filter a web page can take).

    Raises:
        ConfigError: ``where`` uses an operator (``$and``, ``{"$gt": ...}``), which only a store
            can evaluate.
    """
    if not where:
        return True
    for key, value in where.items():
        if key.startswith("$") or isinstance(value, Mapping):
            raise ConfigError(
                f"a web retriever filters on plain metadata equality only, got {key!r}: {value!r}"
            )
        if metadata.get(key) != value:
            return False
    return True


def ranked_hits(
    documents: Sequence[Sequence[Document]],
    *,
    top_k: int,
    where: Mapping[str, Any] | None = None,
) -> list[Hit]:
    """Hits from each result's documents (its page chunks, or its snippet), best first.

    Results keep the provider's order; a page's chunks interleave with the other results
    (every result's first chunk, then every second chunk, ...), so one long page does not push
    the other results out of ``top_k``. Scores are ``1 / rank``: providers' own scores are not
    comparable across providers.
    """
    order = sorted(
        (
            (chunk, position, doc)
            for position, docs in enumerate(documents)
            for chunk, doc in enumerate(docs)
        ),
        key=lambda item: (item[0], item[1]),
    )
    hits: list[Hit] = []
    seen: set[str] = set()
    for _, _, doc in order:
        if len(hits) >= top_k:
            break
        if doc.id in seen or not matches(doc.metadata, where):
            continue
        seen.add(doc.id)
        rank = len(hits) + 1
        hits.append(Hit(doc, 1.0 / rank, rank))
    return hits
