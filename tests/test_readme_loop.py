import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def test_loop_section_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python example in the README's loop section runs and stops with enough relevant."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## The corrective loop", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), namespace)
    assert ("a", "b") == namespace["result"].kept_ids  # type: ignore[attr-defined]
    assert (tmp_path / "runs.jsonl").exists()
