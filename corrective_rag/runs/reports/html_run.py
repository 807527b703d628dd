"""One question's timeline in the HTML report: its iterations, kept documents, answer and diffs.

Per iteration: the query and where it came from, the documents judged with their verdicts and
reasons, what was kept or dropped, CRAG's action, the fallback and the rewrite; then the stop
reason, the kept documents, the answer, and the diff with other runs of the same question
(:func:`~corrective_rag.runs.reports.diff.diff_runs`). Every text passes through
:func:`~corrective_rag.runs.reports.html_text.esc`, cut to the bounds set there.
"""

from __future__ import annotations

from collections.abc import Sequence

from corrective_rag.errors import cut_text
from corrective_rag.runs.records.results import ResultRecord
from corrective_rag.runs.reports.diff import diff_runs
from corrective_rag.runs.reports.html_text import (
    DIFF_CHARS,
    MAX_KEPT,
    MAX_VERDICT_ROWS,
    RUN_BYTES,
    TEXT_CHARS,
    esc,
    num,
)
from corrective_rag.types import IterationRecord, RewriteSource, RunResult, Verdict

__all__ = ["run_section"]


def _origin(result: RunResult, rec: IterationRecord) -> str:
    """Where an iteration's query came from: the question, or what ended the iteration before."""
    if rec.index == 1:
        return "question"
    before = result.history[rec.index - 2].rewrite
    if before is None:
        return "question"
    return {
        RewriteSource.REWRITER: "rewrite",
        RewriteSource.PROPOSAL: "judge's proposal",
        RewriteSource.NEXT_HITS: "question's next hits",
    }[before.source]


def _verdict_cells(verdict: Verdict) -> str:
    if not verdict.graded:
        return f'<td class="ungraded">ungraded</td><td></td><td></td><td>{esc(verdict.error)}</td>'
    label = verdict.label.value if verdict.label else "?"
    reason = verdict.reasoning
    if verdict.missing:
        reason += f" (missing: {', '.join(verdict.missing)})"
    if verdict.probability is not None:  # the model's token probability, recorded or deciding
        decided = "decided" if verdict.score_source == "logprob" else "recorded"
        reason += f" [P(true) {verdict.probability:.2f}, {decided}]"
    return (
        f'<td>{esc(label)}</td><td class="num">{num(verdict.score)}</td>'
        f'<td class="num">{num(verdict.confidence)}</td><td>{esc(reason)}</td>'
    )


def _iteration(result: RunResult, rec: IterationRecord) -> str:
    usage = rec.usage.total
    out = [
        f'<li><b>iteration {rec.index}</b> <span class="q">{esc(rec.query)}</span>'
        f'<span class="tag">from {esc(_origin(result, rec))}</span>'
    ]
    if len(rec.searched) > 1:
        searched = ", ".join(f'<span class="q">{esc(s)}</span>' for s in rec.searched)
        out.append(f"<div>searched: {searched}</div>")
    action = rec.action.value if rec.action else "-"
    fallback = f"; fallback {esc(rec.fallback.value)}" if rec.fallback else ""
    out.append(
        f'<div class="muted">retrieved {len(rec.retrieved)}, skipped {len(rec.skipped_ids)} '
        f"already judged, judged {len(rec.verdicts)}: "
        f'<span class="kept">kept {len(rec.kept_ids)}</span>, '
        f'<span class="dropped">dropped {len(rec.dropped_ids)}</span>, '
        f'<span class="ungraded">ungraded {len(rec.ungraded_ids)}</span>; '
        f"CRAG action {esc(action)}{fallback}; {usage.llm_calls} calls, "
        f"{usage.total_tokens} tokens, {rec.seconds:.2f} s</div>"
    )
    if rec.verdicts:
        kept, dropped = set(rec.kept_ids), set(rec.dropped_ids)
        ranks = {r.document_id: r.rank for r in rec.retrieved}
        out.append(
            '<table class="judged"><thead><tr><th>document</th><th class="num">rank</th>'
            '<th>decision</th><th>label</th><th class="num">score</th>'
            '<th class="num">conf.</th><th>reason</th></tr></thead><tbody>'
        )
        for v in rec.verdicts[:MAX_VERDICT_ROWS]:
            decision = (
                "kept" if v.document_id in kept else "dropped" if v.document_id in dropped else ""
            )
            decision = decision or "ungraded"
            rank = "" if ranks.get(v.document_id) is None else str(ranks[v.document_id])
            out.append(
                f'<tr><td>{esc(v.document_id)}</td><td class="num">{rank}</td>'
                f'<td class="{decision}">{decision}</td>{_verdict_cells(v)}</tr>'
            )
        out.append("</tbody></table>")
        if len(rec.verdicts) > MAX_VERDICT_ROWS:
            out.append(
                f'<div class="muted">{len(rec.verdicts) - MAX_VERDICT_ROWS} more judged '
                "documents not listed</div>"
            )
    rw = rec.rewrite
    if rw is not None:
        if rw.query is not None:
            why = f" ({esc(rw.rationale)})" if rw.rationale else ""
            source = {RewriteSource.PROPOSAL: "judge's proposal"}.get(rw.source, "rewrite")
            out.append(
                f'<div>next query ({source}): <span class="q">{esc(rw.query)}</span>{why}</div>'
            )
        else:
            candidate = (
                f' (candidate <span class="q">{esc(rw.candidate)}</span>)' if rw.candidate else ""
            )
            then = (
                "; next: the question's next hits" if rw.source is RewriteSource.NEXT_HITS else ""
            )
            out.append(
                f"<div>rewrite rejected: {esc(rw.rejected or 'no query')}{candidate}{then}</div>"
            )
    out.append("</li>")
    return "\n".join(out)


def run_section(
    n: int, rec: ResultRecord, share: float | None, earlier: Sequence[tuple[str, RunResult]]
) -> str:
    """Question ``n``'s timeline as a ``<details>`` block (``id="q-n"``, the table links to it).

    Args:
        n: the question's row number in the page's table.
        rec: the question's last record; an error record shows its error only.
        share: the share of its relevant documents the run kept (None: no qrels).
        earlier: other runs of the same question, labelled, each shown as a diff with this one.
    """
    res = rec.result
    head = f"{rec.id}: {rec.query}"
    out = [f'<details class="run" id="q-{n}"><summary>{esc(head)}</summary>']
    if res is None:
        out.append(
            f'<p class="dropped">{esc(rec.error.get("type", ""))}: '
            f"{esc(rec.error.get('message', ''))}</p></details>"
        )
        return "\n".join(out)
    total = res.usage.total
    found = f"; found {num(share, '.0%')} of the relevant documents" if share is not None else ""
    out.append(
        f'<p class="muted">run {esc(res.run_id)} {esc(res.started_at)}; {res.iterations} '
        f"iterations, kept {len(res.kept)}{found}; {total.llm_calls} LLM calls, "
        f"{total.total_tokens} tokens, ${total.cost_usd:.4f}, {res.seconds:.2f} s</p>"
    )
    out.append('<ol class="timeline">')
    size = 0
    for number, it in enumerate(res.history):
        if size > RUN_BYTES:
            left = len(res.history) - number
            out.append(f'<li class="muted">{left} more iterations not shown</li>')
            break
        out.append(_iteration(res, it))
        size += len(out[-1])
    out.append(
        f'<li class="stop"><b>stopped: {esc(res.stop_reason.value)}</b> '
        f'<span class="muted">{esc(res.stop_detail)}</span></li></ol>'
    )
    if res.kept:
        out.append("<h3>Kept documents</h3>")
        for k in res.kept[:MAX_KEPT]:
            out.append(
                f'<div><b>{esc(k.document.id)}</b> <span class="muted">iteration {k.iteration}, '
                f"rank {k.rank}, score {num(k.verdict.score)}</span>"
                f'<div class="text">{esc(k.document.text, TEXT_CHARS)}</div></div>'
            )
        if len(res.kept) > MAX_KEPT:
            out.append(f'<div class="muted">{len(res.kept) - MAX_KEPT} more kept documents</div>')
    if res.answer is not None:
        cited = ", ".join(res.answer.cited_ids)
        out.append(f'<h3>Answer</h3><div class="text">{esc(res.answer.text, TEXT_CHARS)}</div>')
        if cited:
            out.append(f'<div class="muted">cites {esc(cited)}</div>')
    for label, other in earlier:
        out.append(f"<h3>Diff with {esc(label)}</h3>{_diff_block(diff_runs(other, res))}")
    out.append("</details>")
    return "\n".join(out)


def _diff_block(text: str) -> str:
    styles = {"+": "add", "-": "del", "~": "chg"}
    lines = []
    cut = len(text) > DIFF_CHARS
    for line in cut_text(text, DIFF_CHARS).splitlines():
        css = styles.get(line[:1]) if not line.startswith(("---", "+++")) else None
        lines.append(f'<span class="{css}">{esc(line)}</span>' if css else esc(line))
    if cut:
        lines.append("(the diff goes on: `corrective-rag history diff` shows it whole)")
    return '<pre class="diff">' + "\n".join(lines) + "</pre>"
