"""The web retrievers as CRAG's fallback: through the orchestrator, and through the CLI with a
second local corpus or a (fake) SearxNG instance, all offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog
from fake_search import TAVILY_KEY, FakeSearchServer, Reply
from structlog.testing import capture_logs

from corrective_rag.calls import Retries
from corrective_rag.cli.main import main
from corrective_rag.evaluate.policy import FilterPolicy
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.runs.reports.report import render_kept
from corrective_rag.runs.reports.table import render_table
from corrective_rag.testing.fakes import ListRetriever, ScriptedEvaluator, ScriptedRewriter
from corrective_rag.types import CragAction, Document, FallbackMode
from corrective_rag.web import SearxngRetriever, WebSettings

QUESTION = "Which moon is the largest in the Solar System?"
GANYMEDE = "https://en.example.org/wiki/Ganymede"
WEB = [
    {
        "url": GANYMEDE,
        "title": "Ganymede",
        "content": "Ganymede, a moon of Jupiter, is the largest moon in the Solar System.",
    },
    {"url": "https://example.net/titan", "title": "Titan", "content": "Titan orbits Saturn."},
]
PAGE = """<html><body><nav>Main page | Random article</nav><article><h1>Ganymede</h1>
<p>Ganymede is the largest and most massive moon of Jupiter and the largest moon in the Solar
System. It is bigger than the planet Mercury and is the only moon known to have a magnetic
field.</p></article><footer>Text is available under a licence.</footer></body></html>"""
LOCAL = [Document("py-copy", "the copy module copies a moon of nested lists")]
LOOSE = FilterPolicy(medium_score=0.2, medium_confidence=0.5, incorrect_below=0.3)


def test_an_incorrect_iteration_is_replaced_by_web_results() -> None:
    """CRAG's incorrect action swaps the local document for judged web pages, kept by URL."""
    with FakeSearchServer(WEB) as server:
        web = SearxngRetriever(server.base_url)
        evaluator = ScriptedEvaluator({"py-copy": 0.25, GANYMEDE: 0.9})
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(LOCAL),
            evaluator,
            ScriptedRewriter([]),
            fallback=web,
            policy=LOOSE,
            max_iterations=1,
        )
        result = orch.run(QUESTION)
    record = result.history[0]
    assert (CragAction.INCORRECT, FallbackMode.REPLACED) == (record.action, record.fallback)
    assert (GANYMEDE,) == result.kept_ids
    assert "web" == result.kept[0].document.metadata["source"]
    assert "incorrect+replaced" in render_table(result)
    assert GANYMEDE in render_kept(result)


def test_a_failing_web_search_keeps_the_local_results_and_says_so() -> None:
    """A SearchError from the fallback marks the iteration 'failed'; local kept documents stay."""
    settings = WebSettings(retries=Retries(max_retries=0))
    with FakeSearchServer(WEB) as server, capture_logs() as logs:
        server.faults.append(Reply(503, "<html>maintenance</html>"))
        web = SearxngRetriever(server.base_url, settings=settings)
        evaluator = ScriptedEvaluator({"py-copy": 0.5})
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(LOCAL), evaluator, ScriptedRewriter([]), fallback=web, max_iterations=1
        )
        result = orch.run(QUESTION)
    record = result.history[0]
    assert (CragAction.AMBIGUOUS, FallbackMode.FAILED) == (record.action, record.fallback)
    assert ("py-copy",) == result.kept_ids
    failed = [e for e in logs if e["event"] == "fallback_failed"]
    assert 1 == len(failed) and "503" in failed[0]["error"]


MAIN_DOCS = {
    "copying.txt": "The copy module: copy.deepcopy(x) builds a deep copy of a compound object, "
    "recursively copying nested lists and dicts so that changing the copy leaves the original.",
    "timing.txt": "The timeit module measures the execution time of small code snippets. "
    "timeit.timeit(stmt, number=1000) runs the statement many times and returns seconds.",
    "sorting.txt": "sorted(iterable, key=None, reverse=False) returns a new sorted list; "
    "list.sort() sorts in place. The bisect module keeps a list in sorted order.",
}
ASTRO_DOCS = {
    "ganymede.txt": "Ganymede, a moon of Jupiter, is the largest moon in the Solar System. It is "
    "larger than the planet Mercury and has its own magnetic field.",
    "titan.txt": "Titan is the largest moon of Saturn and the second-largest moon in the Solar "
    "System, with a thick nitrogen atmosphere.",
    "mars.txt": "Mars has two small moons, Phobos and Deimos, probably captured asteroids.",
}


@pytest.fixture
def stores(tmp_path: Path) -> tuple[str, str]:
    """A main store about Python modules and a second one about moons, indexed via main()."""
    paths = []
    for name, docs in (("main", MAIN_DOCS), ("astro", ASTRO_DOCS)):
        folder = tmp_path / name
        folder.mkdir()
        for file, text in docs.items():
            (folder / file).write_text(text)
        store = str(tmp_path / f"store-{name}")
        assert 0 == main(["index", str(folder), "--store", store, "--no-progress"])
        paths.append(store)
    yield paths[0], paths[1]
    structlog.reset_defaults()


@pytest.mark.slow
def test_cli_second_local_corpus_and_web_fallback_end_to_end(
    stores: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run/batch with --fallback-store and --fallback searxng keep the other source's documents."""
    main_store, astro_store = stores
    capsys.readouterr()
    base = ["--store", main_store, "--max-iterations", "1", "--json"]
    assert 0 == main(["run", QUESTION, *base, "--fallback-store", astro_store])
    result = json.loads(capsys.readouterr().out)
    record = result["history"][0]
    assert record["fallback"] in ("replaced", "supplemented")
    kept = [k["document"]["id"] for k in result["kept"]]
    assert any(i.endswith("ganymede.txt#0") for i in kept)

    with FakeSearchServer(WEB) as server:
        page = server.page("ganymede", PAGE)
        server.results = [{**WEB[0], "url": page}, WEB[1]]
        queries = tmp_path / "q.jsonl"
        queries.write_text(json.dumps({"id": "moon", "query": QUESTION}) + "\n")
        out = tmp_path / "r.jsonl"
        web = ["--fallback", "searxng", "--fallback-url", server.base_url, "--fetch-pages"]
        web.append("--fetch-private")  # the pages are on 127.0.0.1
        code = main(
            [
                "batch",
                str(queries),
                "--out",
                str(out),
                "--store",
                main_store,
                "--no-progress",
                "--max-iterations",
                "1",
                *web,
            ]
        )
        assert 0 == code, capsys.readouterr().err
        searched = [r["query"]["q"] for r in server.requests if r["path"] == "/search"]
    assert QUESTION in searched
    capsys.readouterr()
    assert 0 == main(["history", "show", str(out), "moon"])
    shown = capsys.readouterr().out
    assert "+replaced" in shown or "+supplemented" in shown
    assert f"{page}#0" in shown  # the fetched page's first chunk, kept under its URL


@pytest.mark.slow
def test_cli_a_rejected_key_fails_the_fallback_not_the_run_and_never_shows(
    stores: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Tavily 401 echoing the key: the run ends, the iteration says failed, the key is hidden."""
    key = "tvly-env-SECRET-4242"
    monkeypatch.setenv("TAVILY_API_KEY", key)
    main_store, _ = stores
    capsys.readouterr()
    with FakeSearchServer(WEB) as server:
        server.faults.append(Reply(401, json.dumps({"detail": {"error": f"bad key {key}"}})))
        code = main(
            [
                "run",
                QUESTION,
                "--store",
                main_store,
                "--max-iterations",
                "1",
                "--fallback",
                "tavily",
                "--fallback-url",
                server.base_url,
            ]
        )
        sent = server.requests[0]["headers"]["Authorization"]
    captured = capsys.readouterr()
    assert (0, f"Bearer {key}") == (code, sent)
    assert "+failed" in captured.out
    assert "fallback_failed" in captured.err
    assert key not in captured.out + captured.err


@pytest.mark.parametrize(
    ("argv", "env", "words"),
    [
        (["--fallback", "searxng"], {}, "--fallback-url"),
        (["--fallback", "tavily"], {}, "TAVILY_API_KEY"),
        (["--fallback", "brave"], {}, "BRAVE_API_KEY"),
        (["--fallback-url", "http://x"], {}, "needs --fallback"),
        (["--fetch-pages"], {}, "web --fallback"),
        (
            ["--fallback", "searxng", "--fallback-url", "http://x", "--fetch-private"],
            {},
            "--fetch-pages",
        ),
        (["--fallback", "brave", "--fallback-store", "d"], {"BRAVE_API_KEY": "k"}, "not both"),
    ],
)
def test_fallback_flags_are_checked_before_any_work(
    argv: list[str],
    env: dict[str, str],
    words: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """Inconsistent fallback flags or a missing key exit 2 with one line naming the fix."""
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert 2 == main(["run", "q", "--store", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert words in err
    structlog.reset_defaults()


@pytest.mark.slow
def test_cli_keys_echoed_by_results_never_leave_the_process(
    stores: tuple[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Keys echoed in results are not in the table, the -v log, the results file, nor a query."""
    openai = "sk-env-SECRET-77777777"
    monkeypatch.setenv("TAVILY_API_KEY", TAVILY_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", openai)
    main_store, _ = stores
    echo = f"Ganymede is the largest moon in the Solar System; token {TAVILY_KEY} and {openai}"
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "moon", "query": QUESTION}) + "\n")
    out = tmp_path / "r.jsonl"
    capsys.readouterr()
    with FakeSearchServer([{**WEB[0], "title": "Ganymede", "content": echo}]) as server:
        web = ["--fallback", "tavily", "--fallback-url", server.base_url, "--max-iterations", "2"]
        assert 0 == main(["-v", "run", QUESTION, "--store", main_store, *web])
        code = main(["-v", "batch", str(queries), "--out", str(out), "--store", main_store, *web])
        assert 0 == code
        assert 0 == main(["history", "show", str(out), "moon"])
        sent = [r["body"]["query"] for r in server.requests]
    captured = capsys.readouterr()
    everything = [captured.out, captured.err, out.read_text(), *sent]
    assert [] == [text for text in everything if TAVILY_KEY in text or openai in text]
    assert "token ***" in captured.out  # the kept web document, shown masked
    # the local rewriter builds queries from kept text: no piece of a key becomes a search word
    assert [] == [q for q in sent if "secret" in q.lower()]
