"""runs/ is three folders by job, and their imports run one way: records <- reports <- execution.

"How results are written" (records) must never depend on "how the report is drawn" (reports) or
on how a batch runs (execution), so a new column or chart cannot change what a results file holds.
The import graph is the one tests/test_layers.py reads from the source (lazy imports count).
"""

from __future__ import annotations

from test_layers import GRAPH

# Lower sits lower: a folder may import its own modules and those of the folders below it.
FOLDERS = {"records": 0, "reports": 1, "execution": 2}


def _folder(module: str) -> str | None:
    bits = module.split(".")
    return bits[2] if len(bits) > 2 and bits[:2] == ["corrective_rag", "runs"] else None


def test_every_runs_module_lives_in_a_job_folder() -> None:
    """No module sits loose in runs/: each is execution, records or reports."""
    loose = sorted(m for m in GRAPH if _folder(m) is not None and _folder(m) not in FOLDERS)
    assert [] == loose


def test_runs_folders_import_downward_only() -> None:
    """Records import neither reports nor execution; reports never import execution."""
    upward = sorted(
        (module, target)
        for module, targets in GRAPH.items()
        if (here := _folder(module)) in FOLDERS
        for target in targets
        if (there := _folder(target)) in FOLDERS and FOLDERS[there] > FOLDERS[here]
    )
    assert [] == upward
