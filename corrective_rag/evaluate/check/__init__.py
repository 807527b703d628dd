"""Checking judges against known answers: is a judge worth running, and at which threshold?

The judges themselves live one level up (:mod:`corrective_rag.evaluate`); this package grades
labelled pairs with them and measures the decisions a run would make:

* :mod:`~corrective_rag.evaluate.check.pairs`: the built-in question-document pairs and a
  user's own (``--pairs FILE.jsonl``);
* :mod:`~corrective_rag.evaluate.check.plain`: ``judge-check`` without ``--compare``: one judge,
  pass or fail;
* :mod:`~corrective_rag.evaluate.check.fit`: AUC, F1 and the F1-best threshold (pure maths);
* :mod:`~corrective_rag.evaluate.check.compare`: every judge side by side on the same pairs,
  thresholds fitted on half the questions and reported on the rest.
"""
