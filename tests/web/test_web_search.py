"""Web-search retrievers against a fake server speaking the documented SearxNG, Tavily and Brave
JSON shapes on 127.0.0.1: parsing, dedupe, retries, deadlines, errors and keys kept secret."""

from __future__ import annotations

import json
import random

import pytest
import structlog
from fake_search import BRAVE_KEY, TAVILY_KEY, FakeSearchServer, Reply, brave_error, tavily_error

from corrective_rag.calls import Retries, Timeouts
from corrective_rag.errors import ConfigError, InputError, SearchError
from corrective_rag.protocols import Retriever
from corrective_rag.web import BraveRetriever, SearxngRetriever, TavilyRetriever, WebSettings

RESULTS = [
    {"url": "https://example.org/aspirin", "title": "Aspirin", "content": "Aspirin reduces fever."},
    {"url": "https://Example.org/aspirin/#history", "title": "Aspirin again", "content": "Same."},
    {"url": "https://example.org/ibuprofen", "title": "Ibuprofen", "content": "An NSAID."},
    {"url": "ftp://example.org/file", "title": "FTP", "content": "Not a web page."},
]


class Waits(list[float]):
    """Records the waits a retrier asked for instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make(provider: str, server: FakeSearchServer, **options: object) -> Retriever:
    options.setdefault("rng", random.Random(0))
    if provider == "searxng":
        return SearxngRetriever(server.base_url, **options)  # type: ignore[arg-type]
    if provider == "tavily":
        return TavilyRetriever(TAVILY_KEY, base_url=server.base_url, **options)  # type: ignore[arg-type]
    return BraveRetriever(BRAVE_KEY, base_url=server.base_url, **options)  # type: ignore[arg-type]


PROVIDERS = ["searxng", "tavily", "brave"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_results_become_web_documents_deduplicated_by_url(provider: str) -> None:
    """Each provider's documented shape becomes hits with URL ids, title, text and source web."""
    with FakeSearchServer(RESULTS) as server:
        hits = make(provider, server).retrieve("aspirin fever", top_k=10)
    assert ["https://example.org/aspirin", "https://example.org/ibuprofen"] == [
        h.document.id for h in hits
    ]
    first = hits[0].document
    assert {
        "url": "https://example.org/aspirin",
        "title": "Aspirin",
        "source": "web",
        "provider": provider,
    } == dict(first.metadata)
    assert first.text.startswith("Aspirin\nAspirin reduces fever.")
    assert [1, 2] == [h.rank for h in hits]
    assert isinstance(make(provider, server), Retriever)


def test_requests_follow_each_documented_api() -> None:
    """SearxNG gets format=json, Tavily a Bearer POST body, Brave the subscription-token header."""
    with FakeSearchServer(RESULTS) as server:
        SearxngRetriever(server.base_url, language="en").retrieve("q1", top_k=3)
        TavilyRetriever(TAVILY_KEY, base_url=server.base_url).retrieve("q2", top_k=3)
        BraveRetriever(BRAVE_KEY, base_url=server.base_url).retrieve("q3", top_k=3)
    searx, tavily, brave = server.requests
    assert ("GET", "/search", "json", "q1", "en") == (
        searx["method"],
        searx["path"],
        searx["query"]["format"],
        searx["query"]["q"],
        searx["query"]["language"],
    )
    assert ("POST", f"Bearer {TAVILY_KEY}") == (
        tavily["method"],
        tavily["headers"]["Authorization"],
    )
    # the API's maximum whatever top_k: a later iteration asking for more reuses the answer
    assert {"query": "q2", "max_results": 20, "search_depth": "basic"}.items() <= tavily[
        "body"
    ].items()
    assert ("/res/v1/web/search", BRAVE_KEY, "20") == (
        brave["path"],
        brave["headers"]["X-Subscription-Token"],
        brave["query"]["count"],
    )
    assert all(r["headers"]["User-Agent"].startswith("corrective_rag/") for r in server.requests)


def test_brave_highlight_markup_is_removed() -> None:
    """Brave's <strong> highlights and HTML entities do not reach the document text."""
    with FakeSearchServer(RESULTS[:1]) as server:
        (hit,) = make("brave", server).retrieve("aspirin", top_k=5)
    assert "Aspirin\nAspirin reduces fever. & more" == hit.document.text


@pytest.mark.parametrize(
    ("provider", "fault"),
    [
        ("searxng", Reply(429, "Too Many Requests", {"Retry-After": "2"})),
        (
            "tavily",
            Reply(
                429, json.dumps({"detail": {"error": "excessive requests"}}), {"Retry-After": "2"}
            ),
        ),
        (
            "brave",
            brave_error(
                429,
                "RATE_LIMITED",
                "Request rate limit exceeded",
                {"X-RateLimit-Remaining": "0, 1999", "X-RateLimit-Reset": "2, 86400"},
            ),
        ),
    ],
)
def test_rate_limit_waits_what_the_server_asks_then_succeeds(provider: str, fault: Reply) -> None:
    """A 429 is retried after the server's Retry-After (Brave: its exhausted window's reset)."""
    waits = Waits()
    with FakeSearchServer(RESULTS) as server:
        server.faults.append(fault)
        hits = make(provider, server, sleep=waits).retrieve("aspirin", top_k=2)
    assert [2.0] == waits
    assert 2 == len(hits)
    assert 2 == len(server.requests)


def test_server_errors_are_retried_with_backoff_then_reported() -> None:
    """5xx answers are retried max_retries times, then raise SearchError with status and body."""
    waits = Waits()
    settings = WebSettings(retries=Retries(max_retries=2, backoff_base=0.5))
    with FakeSearchServer(RESULTS) as server:
        for _ in range(3):
            server.faults.append(Reply(502, "<html>bad gateway</html>"))
        with pytest.raises(SearchError) as info:
            make("searxng", server, sleep=waits, settings=settings).retrieve("aspirin")
    assert 502 == info.value.status
    assert "bad gateway" in str(info.value)
    assert 2 == len(waits)
    assert 3 == len(server.requests)


def test_a_wait_past_the_deadline_is_not_waited_for() -> None:
    """A Retry-After longer than the time left fails at once, saying so."""
    waits = Waits()
    settings = WebSettings(deadline=5.0)
    with FakeSearchServer(RESULTS) as server:
        server.faults.append(tavily_error(429, "excessive requests"))
        server.faults[0].headers["Retry-After"] = "10"
        with pytest.raises(SearchError, match="deadline") as info:
            make("tavily", server, sleep=waits, settings=settings).retrieve("aspirin")
    assert [] == waits
    assert 429 == info.value.status


def test_exhausted_monthly_quota_is_not_waited_for() -> None:
    """Brave's monthly window at 0 means a wait of days: reported, not slept."""
    waits = Waits()
    headers = {"X-RateLimit-Remaining": "1, 0", "X-RateLimit-Reset": "1, 1419704"}
    with FakeSearchServer(RESULTS) as server:
        server.faults.append(brave_error(429, "RATE_LIMITED", "Monthly quota exceeded", headers))
        with pytest.raises(SearchError, match="asks to wait 1419704 s"):
            make("brave", server, sleep=waits).retrieve("aspirin")
    assert [] == waits


@pytest.mark.parametrize(
    ("provider", "fault", "status", "words"),
    [
        (
            "tavily",
            tavily_error(432, "This request exceeds your plan's set usage limit."),
            432,
            "plan",
        ),
        ("tavily", tavily_error(400, "Invalid topic."), 400, "Invalid topic"),
        (
            "brave",
            brave_error(422, "VALIDATION", "Unable to validate request parameter(s)"),
            422,
            "VALIDATION",
        ),
    ],
)
def test_client_errors_are_not_retried(
    provider: str, fault: Reply, status: int, words: str
) -> None:
    """4xx other than 429 fail at once with the provider's error message in the SearchError."""
    with FakeSearchServer(RESULTS) as server:
        server.faults.append(fault)
        with pytest.raises(SearchError, match=words) as info:
            make(provider, server).retrieve("aspirin")
    assert status == info.value.status
    assert 1 == len(server.requests)


def test_searxng_without_json_format_says_how_to_enable_it() -> None:
    """An instance answering 403 to format=json gets a hint naming search.formats."""
    with FakeSearchServer(RESULTS) as server:
        server.faults.append(Reply(403, "<html>Forbidden</html>"))
        with pytest.raises(SearchError, match=r"search\.formats"):
            make("searxng", server).retrieve("aspirin")


@pytest.mark.parametrize("provider", ["tavily", "brave"])
def test_the_key_never_shows(provider: str) -> None:
    """A wrong key's error, a server echoing the key, reprs and logs never show the key."""
    key = TAVILY_KEY if provider == "tavily" else BRAVE_KEY
    with FakeSearchServer(RESULTS) as server, structlog.testing.capture_logs() as logs:
        server.faults.append(Reply(500, f"internal error for key {key}"))
        server.faults.append(Reply(401, json.dumps({"detail": {"error": f"bad key {key}"}})))
        retriever = make(provider, server, sleep=Waits())
        with pytest.raises(SearchError) as info:
            retriever.retrieve("aspirin")
    shown = [str(info.value), repr(info.value), info.value.body, repr(retriever), repr(logs)]
    assert 401 == info.value.status
    assert all(key not in text for text in shown)
    assert "***" in str(info.value)


def test_a_hanging_server_times_out_within_the_deadline() -> None:
    """A server that never answers gives a SearchError after the read timeouts, not a hang."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts connections, never answers
    port = listener.getsockname()[1]
    settings = WebSettings(timeouts=Timeouts(connect=1.0, read=0.2), retries=Retries(max_retries=1))
    waits = Waits()
    try:
        with pytest.raises(SearchError, match="timed out"):
            SearxngRetriever(f"http://127.0.0.1:{port}", settings=settings, sleep=waits).retrieve(
                "q"
            )
    finally:
        listener.close()
    assert 1 == len(waits)


@pytest.mark.parametrize(
    "body", ["<html>not json</html>", json.dumps({"results": "nope"}), json.dumps([1, 2])]
)
def test_unusable_bodies_raise_search_error(body: str) -> None:
    """A 200 whose body is not JSON or not the documented shape raises SearchError."""
    with FakeSearchServer(RESULTS) as server:
        server.faults.append(Reply(200, body))
        with pytest.raises(SearchError):
            make("tavily", server).retrieve("aspirin")


def test_where_filters_on_metadata_equality_and_refuses_operators() -> None:
    """where keeps hits whose metadata match; an operator is a ConfigError."""
    with FakeSearchServer(RESULTS) as server:
        retriever = make("searxng", server)
        assert 2 == len(retriever.retrieve("q", where={"source": "web"}))
        assert [] == retriever.retrieve("q", where={"provider": "tavily"})
        with pytest.raises(ConfigError):
            retriever.retrieve("q", where={"$and": [{"source": "web"}]})


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: TavilyRetriever(""), "api_key"),
        (lambda: TavilyRetriever("tvly-abc\n"), "stray newline"),
        (lambda: BraveRetriever("k", base_url="ftp://x"), "base_url"),
        (lambda: SearxngRetriever("localhost:8888"), "base_url"),
        (lambda: SearxngRetriever("http://h", safesearch=3), "safesearch"),
        (lambda: TavilyRetriever("k", search_depth="deep"), "search_depth"),
        (lambda: BraveRetriever("k", safesearch="some"), "safesearch"),
        (lambda: SearxngRetriever("http://h", fetch_top=0), "fetch_top"),
        (lambda: WebSettings(deadline=0), "deadline"),
    ],
)
def test_bad_settings_are_config_errors(build: object, words: str) -> None:
    """Invalid constructor arguments raise ConfigError naming the argument."""
    with pytest.raises(ConfigError, match=words):
        build()  # type: ignore[operator]


def test_bad_queries_and_top_k_are_refused_before_any_request() -> None:
    """An empty query is an InputError and a zero top_k a ConfigError; nothing is sent."""
    with FakeSearchServer(RESULTS) as server:
        retriever = make("searxng", server)
        with pytest.raises(InputError):
            retriever.retrieve("  ")
        with pytest.raises(ConfigError):
            retriever.retrieve("q", top_k=0)
    assert [] == server.requests


def test_document_ids_drop_the_fragment_and_keep_long_urls_apart() -> None:
    """A #fragment is not part of the id (one page, one id); cut long URLs stay distinct."""
    from corrective_rag.web.results import document_id

    assert "https://example.org/a" == document_id("https://example.org/a#:~:text=moon")
    long = "https://example.org/" + "x" * 600
    assert len(document_id(long)) <= 504 and document_id(long) != document_id(long + "y")


def test_a_large_top_k_asks_the_api_for_its_maximum() -> None:
    """top_k beyond an API's maximum is not an error: the request asks for the maximum (20)."""
    with FakeSearchServer(RESULTS) as server:
        hits = make("brave", server).retrieve("aspirin", top_k=500)
    assert "20" == server.requests[0]["query"]["count"]
    assert 2 == len(hits)


def test_a_key_in_the_searxng_url_is_redacted() -> None:
    """A password in the SearxNG URL does not show in errors or the repr."""
    settings = WebSettings(retries=Retries(max_retries=0))
    with FakeSearchServer(RESULTS) as server:
        url = server.base_url.replace("http://", "http://user:hunter2pass@")
        server.faults.append(Reply(500, "boom"))
        retriever = SearxngRetriever(url, settings=settings)
        with pytest.raises(SearchError) as info:
            retriever.retrieve("q")
    assert "hunter2pass" not in str(info.value) + repr(retriever)
