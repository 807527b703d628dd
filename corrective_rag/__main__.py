"""``python3 -m corrective_rag ...`` is the ``corrective-rag`` command."""

from corrective_rag.cli.main import entry

entry()
