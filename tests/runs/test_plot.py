import json

import pytest
from runs_helpers import make_result

from corrective_rag.errors import InputError, LLMTimeoutError
from corrective_rag.runs.records.results import error_line, ok_line
from corrective_rag.runs.reports.plot import plot
from corrective_rag.types import StopReason, Usage

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _write(path, results, errors=0):
    with path.open("w") as fh:
        for i, res in enumerate(results):
            fh.write(json.dumps(ok_line(f"q{i}", res.question, res, 1.0 + i)) + "\n")
        for i in range(errors):
            fh.write(json.dumps(error_line(f"e{i}", "x", LLMTimeoutError("t"), 0.1)) + "\n")


def test_plot_writes_a_png_image(tmp_path):
    """A batch with ok and failed runs is drawn into a PNG of a readable size."""
    import matplotlib.image

    src = tmp_path / "r.jsonl"
    _write(src, [make_result(f"q{i}", kept_per_iteration=(i % 3, 1)) for i in range(12)], errors=2)
    out = plot(src, tmp_path / "fig" / "batch.png")
    assert PNG_MAGIC == out.read_bytes()[:8]
    height, width = matplotlib.image.imread(out).shape[:2]
    assert width >= 1000 and height >= 700


def test_plot_without_llm_cost_falls_back_to_seconds(tmp_path):
    """Runs that made no LLM calls (the local default) still plot, showing seconds per query."""
    src = tmp_path / "r.jsonl"
    free = Usage()
    _write(src, [make_result("q", grading=free, rewriting=free, stop=StopReason.NO_PROGRESS)])
    assert PNG_MAGIC == plot(src, tmp_path / "b.png").read_bytes()[:8]


def test_plot_refuses_a_batch_with_no_successful_run(tmp_path):
    """A results file holding only errors is an InputError, not an empty figure."""
    src = tmp_path / "r.jsonl"
    _write(src, [], errors=2)
    with pytest.raises(InputError, match="nothing to plot"):
        plot(src, tmp_path / "b.png")
