"""How a batch runs: questions in, one results line out per question, threads or Ray.

* :mod:`~corrective_rag.runs.execution.queries`: the queries file read and checked, shards.
* :mod:`~corrective_rag.runs.execution.batch`: ``run_batch``, the single writer, resume, Ctrl-C.
* :mod:`~corrective_rag.runs.execution.attempt`: one question into its line, whatever happens.
* :mod:`~corrective_rag.runs.execution.failures`: a run whose LLM calls all failed, and why.
* :mod:`~corrective_rag.runs.execution.ray_engine`: the same batch on a Ray cluster.

Writes through :mod:`corrective_rag.runs.records` and returns the batch's summary
(:mod:`~corrective_rag.runs.reports.summary`); ``run_batch`` is exported by the root,
``corrective_rag``.
"""
