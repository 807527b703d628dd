"""What runs leave behind, in three folders by job.

* :mod:`corrective_rag.runs.execution`: how a batch runs (queries in, one results line out each).
* :mod:`corrective_rag.runs.records`: how results are written and read back (results files,
  run history, the JSON codec).
* :mod:`corrective_rag.runs.reports`: how the report is drawn (summary, tables, CSV, plot, HTML).

Imports run one way: execution and reports read and write through records; execution returns a
report's summary; records import neither.
"""

from corrective_rag.runs.records.history import HistoryStore, result_from_json, result_to_json
from corrective_rag.runs.records.results import ResultRecord, read_results
from corrective_rag.runs.reports.summary import BatchSummary, summarize
from corrective_rag.runs.reports.table import render_table

# run_batch: its home is corrective_rag
__all__ = [
    "BatchSummary",
    "HistoryStore",
    "ResultRecord",
    "read_results",
    "render_table",
    "result_from_json",
    "result_to_json",
    "summarize",
]
