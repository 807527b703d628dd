"""Evaluators (LLM and local) and the filter policy that turns verdicts into keep/drop."""
