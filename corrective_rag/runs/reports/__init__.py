"""How the report is drawn: what runs did, as text, tables, CSV, a figure or an HTML page.

* :mod:`~corrective_rag.runs.reports.summary`: figures over a batch (stop reasons, calls, cost).
* :mod:`~corrective_rag.runs.reports.report`: the terminal's run list, run table, kept, CSV.
* :mod:`~corrective_rag.runs.reports.plot`: one matplotlib figure of a batch.
* :mod:`~corrective_rag.runs.reports.html`: one self-contained HTML page for a results file.

Reads records through :mod:`corrective_rag.runs.records` and never runs a query; the user-facing
names are exported by :mod:`corrective_rag.runs`.
"""
