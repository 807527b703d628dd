"""What any text of a run becomes in the HTML report: cut to its bound, then escaped.

Safety, as in the terminal output and then some: every text from a run (documents, queries,
model replies) has control characters escaped (:func:`~corrective_rag.text.display.printable`),
then is HTML-escaped, quotes too, by :func:`esc`; the page masks the secrets given before that
(:mod:`~corrective_rag.runs.reports.html`).

Bounded for any results file, however large or crafted: a page of at most about 5 MB. Every
text field is cut (a reasoning, a ``missing`` list, an error, a query: ``FIELD_CHARS``; a kept
document or an answer: ``TEXT_CHARS``; a diff: ``DIFF_CHARS``) with its full length shown; the
table lists the first ``MAX_ROWS`` questions; timelines are added while their share of the page
(``RUNS_BYTES``, and ``RUN_BYTES`` per question) lasts, each iteration's judged table holds at
most ``MAX_VERDICT_ROWS`` documents, and what is left out is said, with the command that shows
it. The bounds are all here, so the page's budget reads in one place.
"""

from __future__ import annotations

import html
import math

from corrective_rag.errors import cut_text
from corrective_rag.text.display import printable

__all__ = ["esc", "num"]

TEXT_CHARS = 2000  # of a kept document shown in the page (the results file holds all of it)
# What keeps the page a few MB (a browser opens it at once; 218 MB took 93 s to write):
FIELD_CHARS = 500  # of any other text: a reasoning (asked for in 12 words), an error, a query
CELL_CHARS = 200  # of a question or id in the table
DIFF_CHARS = 20_000  # of a diff with another run
MAX_ROWS = 1000  # questions in the table (about 1 KB each)
MAX_VERDICT_ROWS = 50  # judged documents listed per iteration
MAX_KEPT = 50  # kept documents shown per question
MAX_BARS = 30  # stop reasons and error types drawn
RUNS_BYTES = 3_000_000  # the timelines together
RUN_BYTES = 300_000  # one question's timeline


def esc(value: object, limit: int = FIELD_CHARS) -> str:
    """Any value as page text: cut (saying its length), control characters escaped, HTML-escaped."""
    return html.escape(printable(cut_text(str(value), limit), keep_newlines=True), quote=True)


def num(value: float | None, spec: str = ".2f") -> str:
    """A number in ``spec`` format; ``-`` for None or NaN."""
    return "-" if value is None or math.isnan(value) else format(value, spec)
