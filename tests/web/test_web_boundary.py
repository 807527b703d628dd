"""The web boundary: internal addresses, deadlines inside the body read, keys, bad results,
filters, repeats and rate limits, each against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from fake_search import TAVILY_KEY, FakeSearchServer, Reply, _Handler
from structlog.testing import capture_logs

from corrective_rag.calls import Retries
from corrective_rag.calls.scope import call_scope
from corrective_rag.errors import Cancelled, SearchError
from corrective_rag.evaluate.policy import FilterPolicy
from corrective_rag.loop.budget import Budget
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.runs.records.history import result_to_json
from corrective_rag.testing.fakes import ListRetriever, ScriptedEvaluator, ScriptedRewriter
from corrective_rag.types import CragAction, Document, FallbackMode, Hit, RunResult
from corrective_rag.web import (
    BraveRetriever,
    PageFetcher,
    SearxngRetriever,
    TavilyRetriever,
    WebSettings,
)
from corrective_rag.web.guard import public_address

QUESTION = "Which moon is the largest in the Solar System?"
LOCAL = [Document("py-copy", "the copy module copies a moon of nested lists", {"lang": "en"})]
SECRET_PAGE = (
    "<html><body><article><p>internal admin token: hunter2-internal</p></article></body></html>"
)
LOOSE = FilterPolicy(medium_score=0.2, medium_confidence=0.5, incorrect_below=0.3)
BOUND = 60.0  # generous bound on a worker thread; the outcome is asserted, never the time


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(work())
        except BaseException as exc:  # handed to the test
            out.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, out


def _orchestrator(fallback: Any, **options: Any) -> CorrectiveRAGOrchestrator:
    options.setdefault("max_iterations", 1)
    return CorrectiveRAGOrchestrator(
        ListRetriever(LOCAL),
        options.pop("evaluator", ScriptedEvaluator({"py-copy": 0.5}, default=0.5)),
        options.pop("rewriter", ScriptedRewriter([])),
        fallback=fallback,
        **options,
    )


def _page_requests(server: FakeSearchServer) -> list[str]:
    return [r["path"] for r in server.requests if r["path"].startswith("/pages/")]


# -- internal addresses --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("240.0.0.1", False),
        ("255.255.255.255", False),
        ("::1", False),
        ("::", False),
        ("fe80::1", False),
        ("fc00::1", False),
        ("ff02::1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("64:ff9b::7f00:1", False),
        ("2002:7f00:1::", False),
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("::ffff:93.184.216.34", True),
    ],
)
def test_only_public_addresses_pass_the_guard(address: str, public: bool) -> None:
    """Loopback, private, link-local, shared, multicast, reserved and unspecified are refused."""
    assert public == public_address(address)


def test_internal_pages_are_refused_by_default_directly_and_through_a_redirect() -> None:
    """A result on 127.0.0.1 or localhost, or redirecting there, keeps its snippet: never read."""
    relay = ThreadingHTTPServer(("127.0.0.2", 0), _Handler)  # the "public" host of this test
    with FakeSearchServer() as server:
        relay.owner = server  # type: ignore[attr-defined]
        relay_thread = threading.Thread(target=relay.serve_forever, daemon=True)
        relay_thread.start()
        try:
            secret = server.page("secret", SECRET_PAGE)
            server.redirect("hop", secret)
            via = f"http://127.0.0.2:{relay.server_address[1]}/pages/hop"
            named = secret.replace("127.0.0.1", "localhost")
            server.results = [
                {"url": secret, "title": "Direct", "content": "direct snippet"},
                {"url": named, "title": "Named", "content": "named snippet"},
                {"url": via, "title": "Via", "content": "via snippet"},
            ]
            # The relay's network is allowed, so the redirect hop itself is what is checked.
            fetcher = PageFetcher(allow_networks=("127.0.0.2/32",))
            web = SearxngRetriever(server.base_url, fetch_pages=True, fetcher=fetcher)
            hits = web.retrieve("moon", top_k=10)
        finally:
            relay.shutdown()
            relay.server_close()
    assert ["Direct\ndirect snippet", "Named\nnamed snippet", "Via\nvia snippet"] == [
        h.document.text for h in hits
    ]
    assert ["/pages/hop"] == _page_requests(server)  # the relay answered; the secret never


def test_the_opt_in_fetches_internal_pages_and_follows_redirects_itself() -> None:
    """allow_private=True reads a 127.0.0.1 page, through a redirect too."""
    with FakeSearchServer() as server:
        secret = server.page("secret", SECRET_PAGE)
        hop = server.redirect("hop", "/pages/secret", status=301)
        server.results = [{"url": hop, "title": "Hop", "content": "snippet"}]
        fetcher = PageFetcher(allow_private=True)
        (hit,) = SearxngRetriever(server.base_url, fetch_pages=True, fetcher=fetcher).retrieve("q")
    assert "hunter2-internal" in hit.document.text
    assert hit.document.metadata["fetched"] is True
    assert secret.startswith(server.base_url)


def test_a_redirect_loop_is_cut_after_the_limit() -> None:
    """A page redirecting to itself keeps its snippet after 5 hops."""
    with FakeSearchServer() as server:
        loop = server.redirect("loop", "/pages/loop")
        server.results = [{"url": loop, "title": "Loop", "content": "snippet"}]
        fetcher = PageFetcher(allow_private=True)
        (hit,) = SearxngRetriever(server.base_url, fetch_pages=True, fetcher=fetcher).retrieve("q")
    assert "Loop\nsnippet" == hit.document.text
    assert 6 == len(_page_requests(server))


@pytest.mark.parametrize("provider", ["brave", "tavily"])
def test_keyed_api_calls_never_follow_redirects(provider: str) -> None:
    """A keyed API answering 302 to another host is an error; the key is never sent there."""
    with FakeSearchServer() as server:
        other = server.base_url.replace("127.0.0.1", "localhost")
        if provider == "brave":
            server.faults.append(Reply(302, "", {"Location": f"{other}/res/v1/web/search?q=x"}))
            web: Any = BraveRetriever("BSA-test-SECRET-9876543210", base_url=server.base_url)
        else:
            server.faults.append(Reply(307, "", {"Location": f"{other}/search"}))
            web = TavilyRetriever(TAVILY_KEY, base_url=server.base_url)
        with pytest.raises(SearchError, match="redirect"):
            web.retrieve("moon")
    assert 1 == len(server.requests)


# -- deadlines inside the body read ----------------------------------------------------------


def test_a_dripping_search_api_fails_the_fallback_and_the_run_goes_on() -> None:
    """A search API dripping bytes ends at the deadline: fallback failed, the run goes on."""
    with FakeSearchServer() as server:
        server.drip.add("/search")  # a byte every 0.5 s: the 2 s read timeout never trips
        web = SearxngRetriever(server.base_url, settings=WebSettings(deadline=2.0))
        thread, out = _in_thread(lambda: _orchestrator(web).run(QUESTION))
        thread.join(BOUND)
        assert not thread.is_alive()
    (result,) = out
    assert isinstance(result, RunResult)
    assert FallbackMode.FAILED == result.history[0].fallback
    assert ("py-copy",) == result.kept_ids


def test_a_dripping_page_keeps_its_snippet_within_the_deadline() -> None:
    """A page dripping bytes is given up at the deadline; the snippet stands."""
    with FakeSearchServer() as server:
        page = server.page("slow", SECRET_PAGE)
        server.drip.add("/pages/slow")
        server.results = [{"url": page, "title": "Slow", "content": "slow snippet"}]
        fetcher = PageFetcher(allow_private=True, deadline=2.0)
        web = SearxngRetriever(server.base_url, fetch_pages=True, fetcher=fetcher)
        thread, out = _in_thread(lambda: web.retrieve("moon"))
        thread.join(BOUND)
        assert not thread.is_alive()
    ((hit,),) = out
    assert "Slow\nslow snippet" == hit.document.text


def test_the_runs_max_seconds_ends_a_dripping_search() -> None:
    """Budget.max_seconds bounds the fallback like an LLM call: failed, naming the deadline."""
    with FakeSearchServer() as server, capture_logs() as logs:
        server.drip.add("/search")
        web = SearxngRetriever(server.base_url)  # its own deadline: 30 s
        budget = Budget(max_seconds=1.0)
        thread, out = _in_thread(lambda: _orchestrator(web, budget=budget).run(QUESTION))
        thread.join(BOUND)
        assert not thread.is_alive()
    (result,) = out
    assert FallbackMode.FAILED == result.history[0].fallback
    (failed,) = [e for e in logs if e["event"] == "fallback_failed"]
    assert "Budget.max_seconds" in failed["error"]


def test_a_cancelled_scope_ends_a_dripping_search() -> None:
    """Setting the call scope's event (Ctrl-C) ends a search in flight with Cancelled."""
    cancel = threading.Event()
    with FakeSearchServer() as server:
        server.drip.add("/search")
        web = SearxngRetriever(server.base_url)

        def search() -> list[Hit]:
            with call_scope(cancel=cancel):
                return web.retrieve("moon")

        thread, out = _in_thread(search)
        assert server.dripping.acquire(timeout=BOUND)
        cancel.set()
        thread.join(BOUND)
        assert not thread.is_alive()
    (error,) = out
    assert isinstance(error, Cancelled)


# -- keys ------------------------------------------------------------------------------------


def test_configured_keys_never_reach_documents_or_queries() -> None:
    """Keys echoed in results are masked (a URL holding one is dropped); queries are sent masked."""
    openai = "sk-openai-SECRET-11223344"
    echoed = f"leaked {TAVILY_KEY} and {openai}"
    with FakeSearchServer() as server:
        server.results = [
            {"url": f"https://example.org/k?key={TAVILY_KEY}", "title": "K", "content": "k"},
            {"url": "https://example.org/e", "title": echoed, "content": echoed},
        ]
        web = TavilyRetriever(TAVILY_KEY, base_url=server.base_url, secrets=(openai,))
        (hit,) = web.retrieve(f"moon {openai}")
        sent = server.requests[0]["body"]["query"]
    shown = json.dumps([hit.document.id, hit.document.text, dict(hit.document.metadata)])
    assert TAVILY_KEY not in shown and openai not in shown
    assert "***" in hit.document.text
    assert "moon ***" == sent


def test_a_key_echoed_by_the_search_never_enters_the_next_query() -> None:
    """A rewrite built from a result that echoed the key is searched without the key."""
    with FakeSearchServer() as server:
        server.results = [
            {"url": "https://example.org/g", "title": "Ganymede", "content": f"key {TAVILY_KEY}"}
        ]
        web = TavilyRetriever(TAVILY_KEY, base_url=server.base_url)

        def rewrite(request: Any) -> str:  # a rewriter quoting the web document it saw
            return request.judged[-1].document.text

        orch = _orchestrator(
            web,
            max_iterations=2,
            evaluator=ScriptedEvaluator({"py-copy": 0.5}, default=0.45),
            rewriter=ScriptedRewriter(rewrite),
        )
        result = orch.run(QUESTION)
        queries = [r["body"]["query"] for r in server.requests]
    assert TAVILY_KEY not in result_to_json(result)
    assert all(TAVILY_KEY not in q for q in queries)
    assert 2 == len(queries)


# -- bad results -----------------------------------------------------------------------------


def test_control_characters_in_results_and_pages_do_not_end_the_run() -> None:
    """NUL, control and invisible format characters are cleaned before results become documents."""
    dirty = "Gany\x00mede\x07 is\u200b the\u00ad largest\u202e moon\x1b[31m"
    with FakeSearchServer() as server:
        page = server.page("notes.txt", f"Notes\x00 on {dirty}", "text/plain")
        server.results = [
            {"url": "https://example.org/g", "title": "Gany\x00mede", "content": dirty},
            {"url": page, "title": "Notes", "content": "notes"},
        ]
        fetcher = PageFetcher(allow_private=True)
        web = SearxngRetriever(server.base_url, fetch_pages=True, fetcher=fetcher)
        evaluator = ScriptedEvaluator({"py-copy": 0.5}, default=0.9)
        result = _orchestrator(web, evaluator=evaluator).run(QUESTION)
    assert FallbackMode.SUPPLEMENTED == result.history[0].fallback
    texts = [k.document.text for k in result.kept if k.document.id != "py-copy"]
    assert "Ganymede\nGanymede is the largest moon[31m" in texts
    assert any(t.startswith("Notes\nNotes on Ganymede is the largest moon") for t in texts)


class _Broken:
    """A fallback retriever that fails with an error of no particular kind."""

    def retrieve(
        self, query: str, *, top_k: int = 10, where: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        raise ValueError("unexpected answer")


def test_any_error_of_the_fallback_is_a_failed_fallback() -> None:
    """An exception other than SearchError from the fallback marks it failed; the run ends well."""
    result = _orchestrator(_Broken()).run(QUESTION)
    assert FallbackMode.FAILED == result.history[0].fallback
    assert ("py-copy",) == result.kept_ids


# -- filters ---------------------------------------------------------------------------------


@pytest.mark.parametrize("where", [{"lang": "en"}, {"$and": [{"lang": "en"}, {"lang": "en"}]}])
def test_the_local_filter_is_not_applied_to_the_web(where: dict[str, Any]) -> None:
    """run(where=...) filters the local store only; web results are judged and kept."""
    local = ListRetriever(LOCAL)
    with FakeSearchServer() as server:
        server.results = [{"url": "https://example.org/g", "title": "Ganymede", "content": "x"}]
        web = SearxngRetriever(server.base_url)
        orch = CorrectiveRAGOrchestrator(
            _Plain(local),
            ScriptedEvaluator({"py-copy": 0.1}, default=0.9),
            ScriptedRewriter([]),
            fallback=web,
            max_iterations=1,
        )
        result = orch.run(QUESTION, where=where)
    assert FallbackMode.REPLACED == result.history[0].fallback
    assert ("https://example.org/g",) == result.kept_ids


class _Plain:
    """The local store ignoring operator filters (as a real store would evaluate them)."""

    def __init__(self, inner: ListRetriever) -> None:
        self.inner = inner

    def retrieve(
        self, query: str, *, top_k: int = 10, where: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        return self.inner.retrieve(query, top_k=top_k)


def test_an_empty_fallback_is_recorded_as_empty_and_keeps_the_local_results() -> None:
    """A web search with no results says 'empty', and an incorrect iteration keeps nothing lost."""
    with FakeSearchServer() as server:
        web = SearxngRetriever(server.base_url)
        # relevant (0.6) and kept, yet CRAG's "incorrect" under a policy whose bar is above it
        evaluator = ScriptedEvaluator({"py-copy": 0.6})
        strict = FilterPolicy(medium_score=0.5, medium_confidence=0.5, incorrect_below=0.65)
        result = _orchestrator(web, evaluator=evaluator, policy=strict).run(QUESTION)
    assert CragAction.INCORRECT == result.history[0].action
    assert FallbackMode.EMPTY == result.history[0].fallback
    assert ("py-copy",) == result.kept_ids


# -- repeats and rate limits -----------------------------------------------------------------


def test_one_search_per_distinct_query_and_one_fetch_per_page() -> None:
    """Three iterations search the question once and each rewrite once; a page is read once."""
    with FakeSearchServer() as server:
        page = server.page("g", SECRET_PAGE)
        server.results = [
            {"url": page, "title": "G", "content": "g"},
            {"url": "https://example.org/t", "title": "T", "content": "t"},
        ]
        fetcher = PageFetcher(allow_private=True)
        web = SearxngRetriever(server.base_url, fetch_pages=True, fetcher=fetcher)
        orch = _orchestrator(
            web,
            max_iterations=3,
            evaluator=ScriptedEvaluator({}, default=0.45),
            rewriter=ScriptedRewriter(["moon sizes", "largest moons"]),
        )
        orch.run(QUESTION)
        searched = [r["query"]["q"] for r in server.requests if r["path"] == "/search"]
    # iteration 2 searches the question again (answered from memory) and "moon sizes"; it finds
    # nothing new, so the run stops there
    assert sorted([QUESTION, "moon sizes"]) == sorted(searched)
    assert ["/pages/g"] == _page_requests(server)


def test_a_provider_that_asked_to_wait_is_not_asked_again_in_that_time() -> None:
    """After 429 Retry-After: 3600 the next iterations record 'skipped' and send nothing."""
    settings = WebSettings(retries=Retries(max_retries=1, retry_after_max=5.0))
    with FakeSearchServer() as server:
        server.faults.append(Reply(429, "slow down", {"Retry-After": "3600"}))
        web = SearxngRetriever(server.base_url, settings=settings)
        orch = _orchestrator(
            web,
            max_iterations=3,
            evaluator=ScriptedEvaluator({}, default=0.45),
            rewriter=ScriptedRewriter(["moon sizes", "largest moons"]),
        )
        result = orch.run(QUESTION)
    modes = [r.fallback for r in result.history]
    assert [FallbackMode.FAILED, FallbackMode.SKIPPED] == modes  # then nothing new: no_progress
    assert 1 == len(server.requests)
