"""What runs leave behind: run history, batch results, summaries, reports and plots."""

from corrective_rag.runs.batch import run_batch
from corrective_rag.runs.history import HistoryStore, render_table, result_from_json, result_to_json
from corrective_rag.runs.results import ResultRecord, read_results
from corrective_rag.runs.summary import BatchSummary, summarize

__all__ = [
    "BatchSummary",
    "HistoryStore",
    "ResultRecord",
    "read_results",
    "render_table",
    "result_from_json",
    "result_to_json",
    "run_batch",
    "summarize",
]
