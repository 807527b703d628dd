"""How results are written and read back: the files a run leaves, and nothing that draws them.

* :mod:`~corrective_rag.runs.records.codec`: frozen dataclasses to JSON-ready dicts and back.
* :mod:`~corrective_rag.runs.records.jsonl`: JSONL reading, and the torn-last-line policy.
* :mod:`~corrective_rag.runs.records.results`: a batch's results file, one line per query.
* :mod:`~corrective_rag.runs.records.history`: a run as JSON, and the append-only HistoryStore.
* :mod:`~corrective_rag.runs.records.paths`: output paths that cannot overwrite an input.

Imports nothing else of :mod:`corrective_rag.runs`; the user-facing names are at its face.
"""
