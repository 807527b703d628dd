"""OpenAI-compatible chat client, token counting, JSON parsing and prompts."""
