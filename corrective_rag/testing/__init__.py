"""Public test helpers for users' own tests: scripted components and a scripted LLM server."""
