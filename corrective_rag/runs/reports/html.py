"""One self-contained HTML page for a results file: ``corrective-rag history report --html``.

The page holds the batch summary (:func:`~corrective_rag.runs.reports.summary.summarize`: stop
reasons, LLM calls, tokens, cost, latency; the share of relevant documents found when qrels are
given), a sortable table with one row per question, and per question its iterations as a
timeline (:mod:`~corrective_rag.runs.reports.html_run`).

Safety: the secrets given are masked in every record before anything is drawn, and every text is
escaped and cut by :mod:`~corrective_rag.runs.reports.html_text`, which also holds the bounds that
keep the page about 5 MB at most for any results file; the page loads nothing (no network, no
CDN) and its Content-Security-Policy lets only its own inline script
(:mod:`~corrective_rag.runs.reports.html_assets`) run, named by hash, so a document holding
``<script>`` or ``<img onerror>`` shows as text and cannot run. The batch summary always counts
every question.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from corrective_rag.errors import InputError, cut_text
from corrective_rag.inputs import read_bounded_lines
from corrective_rag.runs.records.codec import from_dict, to_dict
from corrective_rag.runs.records.results import ResultRecord, latest_records
from corrective_rag.runs.reports.html_assets import SCRIPT, STYLE
from corrective_rag.runs.reports.html_run import run_section
from corrective_rag.runs.reports.html_text import (
    CELL_CHARS,
    MAX_BARS,
    MAX_ROWS,
    RUNS_BYTES,
    esc,
    num,
)
from corrective_rag.runs.reports.summary import BatchSummary, summarize
from corrective_rag.text.secrets import redact, redact_tree
from corrective_rag.types import RunResult

__all__ = ["found_share", "read_qrels", "render_html", "write_html"]

Qrels = Mapping[str, Mapping[str, int]]  # query id -> document id -> grade (> 0: relevant)

MAX_QRELS_BYTES = 512 * 1024 * 1024  # a qrels file larger than this is not a qrels file
MAX_QRELS_LINE_BYTES = 4096  # two ids of at most 512 characters (4 UTF-8 bytes each) and a score


# -- qrels ---------------------------------------------------------------------------------------


def read_qrels(path: str | os.PathLike[str]) -> dict[str, dict[str, int]]:
    """Read BEIR qrels (``query-id<TAB>corpus-id<TAB>score``, with or without a header line).

    Read through :mod:`corrective_rag.inputs.files`: bytes counted as read (not the size a
    device claims), a FIFO refused unread, each line bounded before it is held.

    Raises:
        InputError: the file is missing or not a regular file, too large, or a line is too
            long, not UTF-8, or not three tab-separated fields with an integer score.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"qrels file {p} does not exist")
    qrels: dict[str, dict[str, int]] = {}
    lines = read_bounded_lines(p, max_bytes=MAX_QRELS_BYTES, max_line_bytes=MAX_QRELS_LINE_BYTES)
    for number, raw in lines:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{p}:{number}: not UTF-8 text (byte {exc.start})") from None
        fields = line.split("\t")
        if len(fields) != 3:
            raise InputError(f"{p}:{number}: expected query-id, corpus-id and score (tabs)")
        try:
            grade = int(fields[2])
        except ValueError:
            if number == 1:
                continue  # the header line
            raise InputError(f"{p}:{number}: score {fields[2]!r} is not an integer") from None
        qrels.setdefault(fields[0], {})[fields[1]] = grade
    return qrels


def found_share(result: RunResult, grades: Mapping[str, int] | None) -> float | None:
    """Share of the question's relevant documents (grade > 0) that the run kept; None: no qrels."""
    relevant = {d for d, g in (grades or {}).items() if g > 0}
    if not relevant:
        return None
    return len(relevant & set(result.kept_ids)) / len(relevant)


# -- the page ------------------------------------------------------------------------------------


def _masked(record: ResultRecord, secrets: Sequence[str]) -> ResultRecord:
    if not secrets:
        return record
    result = record.result
    if result is not None:
        result = from_dict(RunResult, redact_tree(to_dict(result), secrets))
    error = {k: redact(str(v), secrets) for k, v in record.error.items()}
    return ResultRecord(
        record.id,
        redact(record.query, secrets),
        record.status,
        record.seconds,
        result,
        error,
        record.line,
    )


def _summary(summary: BatchSummary, shares: Sequence[float]) -> str:
    found = sum(shares) / len(shares) if shares else math.nan
    cards = [
        (str(summary.queries), "questions"),
        (f"{summary.ok} / {summary.failures}", "ok / failed"),
        (num(summary.mean_iterations), "iterations, mean"),
        (num(summary.mean_kept), "kept, mean"),
        (str(summary.llm_calls), "LLM calls"),
        (str(summary.total_tokens), "tokens"),
        (f"${summary.cost_usd:.4f}", "cost"),
        (f"{num(summary.latency_p50)} / {num(summary.latency_p95)} s", "time p50 / p95"),
        (num(summary.rewrite_rate, ".0%"), "runs that rewrote"),
        (num(summary.fallback_rate, ".0%"), "runs that fell back"),
    ]
    if shares:
        cards.append((num(found, ".0%"), f"relevant found (qrels, {len(shares)} q)"))
    out = ['<div class="cards" id="summary">']
    out += [f'<div class="card"><b>{esc(v)}</b><span>{esc(k)}</span></div>' for v, k in cards]
    out.append("</div>")
    reasons = dict(summary.stop_reasons)
    for kind, n in summary.error_types.items():
        reasons[f"error: {kind}"] = n
    top = max(reasons.values(), default=0)
    out.append('<h2>Why runs stopped</h2><div class="bars" id="stops">')
    ordered = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    for reason, n in ordered[:MAX_BARS]:
        width = 100.0 * n / top if top else 0.0
        out.append(
            f'<div class="bar"><span>{esc(reason)}</span>'
            f'<i style="width:{width:.1f}%"></i><span>{n}</span></div>'
        )
    if len(ordered) > MAX_BARS:
        rest = sum(n for _, n in ordered[MAX_BARS:])
        out.append(
            f'<span class="muted">{len(ordered) - MAX_BARS} more reasons and error types, '
            f"{rest} runs</span>"
        )
    if not reasons:
        out.append('<span class="muted">no runs</span>')
    out.append("</div>")
    phases = [(p, u) for p, u in summary.usage_by_phase.items() if u["llm_calls"]]
    if phases:
        out.append("<h2>LLM use by phase</h2><table><thead><tr><th>phase</th>")
        out.append('<th class="num">calls</th><th class="num">tokens</th>')
        out.append('<th class="num">cost</th><th class="num">failed</th></tr></thead><tbody>')
        for phase, u in phases:
            out.append(
                f'<tr><td>{esc(phase)}</td><td class="num">{u["llm_calls"]}</td>'
                f'<td class="num">{u["total_tokens"]}</td>'
                f'<td class="num">${float(u["cost_usd"]):.4f}</td>'
                f'<td class="num">{u["failed_calls"]}</td></tr>'
            )
        out.append("</tbody></table>")
    return "\n".join(out)


_COLUMNS = (  # key, heading, numeric
    ("n", "#", True),
    ("id", "id", False),
    ("question", "question", False),
    ("status", "stop reason / error", False),
    ("iterations", "iterations", True),
    ("kept", "kept", True),
    ("found", "found", True),
    ("calls", "LLM calls", True),
    ("tokens", "tokens", True),
    ("cost", "cost $", True),
    ("seconds", "seconds", True),
)


def _cell(value: object, shown: str, numeric: bool) -> str:
    cls = ' class="num"' if numeric else ""
    return f'<td{cls} data-v="{esc(value)}">{shown}</td>'


def _table(
    rows: Sequence[tuple[int, ResultRecord, float | None]], with_found: bool, shown: set[int]
) -> str:
    columns = [c for c in _COLUMNS if with_found or c[0] != "found"]
    head = "".join(
        f'<th data-key="{key}"{" class=num" if num else ""}>{esc(title)}</th>'
        for key, title, num in columns
    )
    out = [f'<table id="runs"><thead><tr>{head}</tr></thead><tbody>']
    for n, rec, share in rows[:MAX_ROWS]:
        res = rec.result
        ident = esc(rec.id, CELL_CHARS)
        link = f'<a href="#q-{n}">{ident}</a>' if n in shown else ident
        cells = {
            "n": _cell(n, str(n), True),
            "id": _cell(cut_text(rec.id, CELL_CHARS), link, False),
            "question": _cell(cut_text(rec.query, CELL_CHARS), esc(rec.query, CELL_CHARS), False),
            "found": _cell(-1 if share is None else share, num(share, ".0%"), True),
            "seconds": _cell(rec.seconds, f"{rec.seconds:.2f}", True),
        }
        if res is not None:
            total = res.usage.total
            cells["status"] = _cell(res.stop_reason.value, esc(res.stop_reason.value), False)
            cells["iterations"] = _cell(res.iterations, str(res.iterations), True)
            cells["kept"] = _cell(len(res.kept), str(len(res.kept)), True)
            cells["calls"] = _cell(total.llm_calls, str(total.llm_calls), True)
            cells["tokens"] = _cell(total.total_tokens, str(total.total_tokens), True)
            cells["cost"] = _cell(total.cost_usd, f"{total.cost_usd:.4f}", True)
        else:
            what = f"error: {rec.error.get('type', '')}"
            cells["status"] = _cell(what, esc(what), False)
            for key in ("iterations", "kept", "calls", "tokens", "cost"):
                cells[key] = _cell(-1, "-", True)
        css = "" if rec.ok else ' class="error"'
        row = "".join(cells[key] for key, _, _ in columns)
        out.append(f'<tr data-i="{n}"{css}>{row}</tr>')
    out.append("</tbody></table>")
    if len(rows) > MAX_ROWS:
        out.append(
            f'<p class="muted" id="rows-left-out">{len(rows) - MAX_ROWS} more questions are '
            "counted in the summary but not listed: `corrective-rag history list RESULTS` lists "
            "them all.</p>"
        )
    return "\n".join(out)


def render_html(
    records: Sequence[ResultRecord],
    *,
    qrels: Qrels | None = None,
    compare: Iterable[ResultRecord] = (),
    secrets: Sequence[str] = (),
    title: str = "corrective_rag runs",
) -> str:
    """The report page for ``records`` (a results file's lines, several per id allowed).

    Args:
        records: the batch's records; the last one per query id is the run shown.
        qrels: relevance judgements by query id; adds the share of relevant documents found.
        compare: records of other runs (another configuration's results file): each question
            shown gets the diff with the last other run of the same question text. Earlier ok
            runs of a question in ``records`` itself are diffed too.
        secrets: strings (an API key) masked as ``***`` everywhere in the page.
        title: the page's title.
    """
    masked = [_masked(r, secrets) for r in records]
    latest = latest_records(masked)
    others: dict[str, list[tuple[str, RunResult]]] = {}
    for rec in masked:  # earlier runs in this file, oldest first
        if rec.result is not None:
            others.setdefault(rec.query, []).append((f"line {rec.line}", rec.result))
    outside: dict[str, tuple[str, RunResult]] = {}
    for rec in (_masked(r, secrets) for r in compare):
        if rec.result is not None:
            outside[rec.query] = (f"the compared file ({rec.id}, line {rec.line})", rec.result)
    rows = []
    shares = []
    for n, rec in enumerate(latest, start=1):
        share = None
        if qrels is not None and rec.result is not None:
            share = found_share(rec.result, qrels.get(rec.id))
            if share is not None:
                shares.append(share)
        rows.append((n, rec, share))
    summary = summarize(masked)
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    policy = (
        f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; "
        "img-src 'none'; base-uri 'none'; form-action 'none'"
    )
    runs: list[str] = []
    shown: set[int] = set()
    size = 0
    for n, rec, share in rows:
        if size > RUNS_BYTES:
            runs.append(
                f'<p class="muted" id="runs-left-out">The timelines of {len(rows) - len(shown)} '
                "more questions are not in this page (it is kept to a few MB): "
                "`corrective-rag history show RESULTS ID` shows any one of them.</p>"
            )
            break
        earlier = []
        if rec.result is not None:
            earlier = [
                (label, r)
                for label, r in others.get(rec.query, [])
                if r.run_id != rec.result.run_id
            ][-1:]
            if rec.query in outside:
                earlier.append(outside[rec.query])
        runs.append(run_section(n, rec, share, earlier))
        shown.add(n)
        size += len(runs[-1])
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>",
        f"<header><h1>{esc(title)}</h1>",
        f'<div class="muted">{len(latest)} questions; click a column to sort, an id to open '
        "its timeline</div></header><main>",
        "<h2>Batch</h2>",
        _summary(summary, shares),
        "<h2>Questions</h2>",
        _table(rows, qrels is not None, shown),
        "<h2>Runs</h2>",
        *runs,
        f"</main><script>{SCRIPT}</script></body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_html(
    records: Sequence[ResultRecord],
    out_path: str | os.PathLike[str],
    *,
    qrels: Qrels | None = None,
    compare: Iterable[ResultRecord] = (),
    secrets: Sequence[str] = (),
    title: str = "corrective_rag runs",
) -> Path:
    """Write :func:`render_html` to ``out_path`` (UTF-8) and return the path."""
    page = render_html(records, qrels=qrels, compare=compare, secrets=secrets, title=title)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out
