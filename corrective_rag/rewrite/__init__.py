"""Rewriters (LLM and local) that propose the next query from the evaluator's feedback."""
