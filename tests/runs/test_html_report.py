"""The HTML run report (runs/reports/html.py): structure, escaping, secrets, the browser."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
import structlog

from corrective_rag.cli.main import main
from corrective_rag.errors import InputError
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.runs.records.results import error_line, ok_line, read_results
from corrective_rag.runs.reports.html import found_share, read_qrels, render_html, write_html
from corrective_rag.testing.fakes import ListRetriever, ScriptedEvaluator, ScriptedRewriter
from corrective_rag.types import Document

KEY = "sk-test-0123456789abcdef"
HOSTILE = (
    "<script>document.title='pwned'</script>"
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"
    f" leaked {KEY} \x1b[31m red"
)
CORPUS = [
    Document("bees", "Honey bees make honey from flower nectar."),
    Document("hive", "Bees keep nectar in wax cells of the hive."),
    Document("evil", "Bees and honey. " + HOSTILE),
    Document("wasp", "Wasps hunt insects."),
    Document("bread", "Bread dough rises with yeast."),
    Document("oven", "An oven bakes bread."),
]
SCORES = {"bees": 0.9, "hive": 0.8, "evil": 0.75, "wasp": 0.1, "bread": 0.9, "oven": 0.2}


def _results(path: Path, *, scores: dict[str, float] | None = None) -> Path:
    """A results file of four questions (one of them a failure) run through a real loop."""
    orch = CorrectiveRAGOrchestrator(
        ListRetriever(CORPUS),
        ScriptedEvaluator(scores or SCORES, default=0.0),
        ScriptedRewriter(["bees honey nectar", None, "bread yeast"]),
        top_k=2,
        max_iterations=3,
        min_relevant=5,
    )
    lines = []
    for n, question in enumerate(["How do bees make honey?", "How does bread rise?", "Wasps?"]):
        result = orch.run(question)
        lines.append(ok_line(f"q{n}", question, result, result.seconds + n))
    lines.append(error_line("q9", f"key {KEY}?", RuntimeError(f"boom {KEY}"), 0.5))
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


class _Page(HTMLParser):
    """Collects what the structural tests look at."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self.rows: list[list[str]] = []
        self._in_script = False
        self._in_title = False
        self.title = ""
        self._in_runs = False
        self._row: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        self._in_title = tag == "title"
        if tag == "table" and dict(attrs).get("id") == "runs":
            self._in_runs = True
        if self._in_runs and tag == "tr":
            self._row = []
        if self._row is not None and tag == "td":
            self._row.append(dict(attrs).get("data-v") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_runs = False
        if tag == "tr" and self._row:
            self.rows.append(self._row)
            self._row = None
        self._in_script = False
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        (self.scripts if self._in_script else self.text).append(data)


def _parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    return parser


def test_the_page_holds_the_summary_table_and_timelines(tmp_path):
    """One row per question, one timeline per question with its iterations, queries and their
    origins, verdict reasons and the stop reason."""
    records = read_results(_results(tmp_path / "r.jsonl"))
    page = _parse(render_html(records))
    assert 4 == len(page.rows)
    assert ["1", "2", "3", "4"] == [row[0] for row in page.rows]
    text = " ".join(page.text)
    for expected in (
        "How do bees make honey?",
        "from question",
        "from rewrite",
        "bees honey nectar",
        "scripted 0.9",  # the verdict's reason
        "stopped: ",
        "Why runs stopped",
        "RuntimeError",
    ):
        assert expected in text
    details = [a for tag, a in page.tags if tag == "details"]
    assert ["q-1", "q-2", "q-3", "q-4"] == [a["id"] for a in details]


def test_document_text_cannot_run_script_in_the_page(tmp_path):
    """A document holding <script> and <img onerror> shows as text: the page has one script
    (its own, named by hash in the CSP) and no element or handler from the document."""
    page_text = render_html(read_results(_results(tmp_path / "r.jsonl")))
    page = _parse(page_text)
    assert 1 == sum(1 for tag, _ in page.tags if tag == "script")
    assert not [tag for tag, _ in page.tags if tag == "img"]
    assert not [k for _, attrs in page.tags for k in attrs if k.startswith("on")]
    assert "<script>document.title='pwned'</script>" in " ".join(page.text)
    assert "\x1b" not in page_text  # control characters escaped as in the terminal
    policy = [a["content"] for tag, a in page.tags if a.get("http-equiv")]
    assert policy and "script-src 'sha256-" in policy[0] and "default-src 'none'" in policy[0]


def test_secrets_are_masked_everywhere(tmp_path):
    """The API key, in a document, a question and an error message, never reaches the page."""
    records = read_results(_results(tmp_path / "r.jsonl"))
    unmasked = render_html(records)
    masked = render_html(records, secrets=[KEY])
    assert KEY in unmasked  # the test can fail: the key is in the results
    assert KEY not in masked
    assert "leaked ***" in masked


def test_found_share_comes_from_qrels(tmp_path):
    """With qrels, each question gets the share of its relevant documents kept, and the batch
    the mean of those shares."""
    records = read_results(_results(tmp_path / "r.jsonl"))
    qrels_file = tmp_path / "qrels.tsv"
    qrels_file.write_text(
        "query-id\tcorpus-id\tscore\nq0\tbees\t1\nq0\twasp\t1\nq1\tbread\t2\nq1\toven\t0\n",
        encoding="utf-8",
    )
    qrels = read_qrels(qrels_file)
    assert {"q0": {"bees": 1, "wasp": 1}, "q1": {"bread": 2, "oven": 0}} == qrels
    shares = [found_share(r.result, qrels.get(r.id)) for r in records if r.result is not None]
    assert [0.5, 1.0, None] == shares
    page = _parse(render_html(records, qrels=qrels))
    assert "75%" in page.text  # the mean over the two questions with qrels
    assert ["0.5", "1.0", "-1", "-1"] == [row[6] for row in page.rows]


def test_a_malformed_qrels_line_is_refused(tmp_path):
    """A qrels line that is not three tab-separated fields says which line."""
    bad = tmp_path / "qrels.tsv"
    bad.write_text("q0\tbees\t1\nq1 bread 1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"qrels.tsv:2"):
        read_qrels(bad)


def test_two_runs_of_a_question_are_diffed(tmp_path):
    """A question run again with another judge shows what the second run kept differently."""
    first = read_results(_results(tmp_path / "a.jsonl"))
    second = read_results(_results(tmp_path / "b.jsonl", scores={**SCORES, "hive": 0.1}))
    page = render_html(second, compare=first)
    assert "Diff with the compared file (q0" in page
    assert "- kept hive" in page
    assert "~ verdict hive: high 0.80/0.90 -&gt; low 0.10/0.90" in page
    assert "Diff with" not in render_html(second)


@pytest.fixture
def _restore_logging():
    """main() configures structlog for the process; give other tests the defaults back."""
    yield
    structlog.reset_defaults()


@pytest.mark.usefixtures("_restore_logging")
def test_the_command_writes_the_page(tmp_path, monkeypatch, capsys):
    """``history report RESULTS --html OUT`` writes the page, masking $OPENAI_API_KEY."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    results = _results(tmp_path / "r.jsonl")
    out = tmp_path / "report.html"
    assert 0 == main(["history", "report", str(results), "--html", str(out)])
    assert f"wrote {out}" in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    assert KEY not in page
    assert 4 == len(_parse(page).rows)
    assert 0 != main(["history", "report", str(results), "--html", str(results)])


# -- in a real browser ---------------------------------------------------------------------------

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("chrome")


def _dump_dom(page: Path, fragment: str = "") -> str:
    assert BROWSER is not None
    out = subprocess.run(
        [
            BROWSER,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout


@pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine")
@pytest.mark.timeout(300)
def test_in_a_browser_the_table_renders_sorts_and_documents_stay_text(tmp_path):
    """Headless Chromium runs the page's script (the table is sorted by the URL's hash) and not
    the hostile document's: its title and body are untouched and its markup shows as text."""
    page = write_html(read_results(_results(tmp_path / "r.jsonl")), tmp_path / "report.html")
    dom = _parse(_dump_dom(page, "#sort=seconds:desc"))
    table = next(a for tag, a in dom.tags if tag == "table" and a.get("id") == "runs")
    assert "1" == table.get("data-ready")
    assert "seconds:desc" == table.get("data-sorted")
    seconds = [float(row[-1]) for row in dom.rows]
    assert sorted(seconds, reverse=True) == seconds
    assert ["3", "2", "4", "1"] == [row[0] for row in dom.rows]  # not the file's order
    body = next(a for tag, a in dom.tags if tag == "body")
    assert "data-pwned" not in body
    assert "corrective_rag runs" == dom.title
    assert "<script>document.title='pwned'</script>" in " ".join(dom.text)


@pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine")
@pytest.mark.timeout(300)
def test_in_a_browser_the_policy_blocks_markup_that_escaped_escaping(tmp_path):
    """Were a text ever left unescaped, the page's CSP would still run only the page's own
    script: raw <script> and <img onerror> pasted into the page change nothing."""
    page_text = render_html(read_results(_results(tmp_path / "r.jsonl")))
    broken = page_text.replace("</main>", HOSTILE + "</main>", 1)
    path = tmp_path / "broken.html"
    path.write_text(broken, encoding="utf-8")
    dom = _parse(_dump_dom(path))
    assert 2 == sum(1 for tag, _ in dom.tags if tag == "script")  # the raw one is in the DOM
    runs = next(a for tag, a in dom.tags if tag == "table" and a.get("id") == "runs")
    assert "1" == runs.get("data-ready")  # the page's own script ran
    assert "data-pwned" not in next(a for tag, a in dom.tags if tag == "body")
    assert "corrective_rag runs" == dom.title
