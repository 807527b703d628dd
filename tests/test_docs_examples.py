"""The Python examples in README.md and docs/ run as printed."""

import ast
import importlib
import re
from pathlib import Path

import pytest

from corrective_rag.testing import ScriptedLLMServer

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _python_block(path: Path, heading: str) -> str:
    """The first ```python block under ``heading`` (up to the next heading of the same level)."""
    text = path.read_text(encoding="utf-8")
    level = heading.split(" ", 1)[0]
    section = text.split(f"\n{heading}\n", 1)[1].split(f"\n{level} ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)[0]


def _run(code: str, path: Path) -> dict[str, object]:
    namespace: dict[str, object] = {}
    exec(compile(code, str(path), "exec"), namespace)
    return namespace


@pytest.fixture
def my_docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding the README's ``my_docs/`` folder."""
    folder = tmp_path / "my_docs"
    folder.mkdir()
    (folder / "ganymede.txt").write_text("Ganymede is the largest moon of Jupiter.\n")
    (folder / "titan.txt").write_text("Titan is the largest moon of Saturn.\n")
    (folder / "bread.md").write_text("Sourdough bread rises slowly overnight.\n")
    monkeypatch.chdir(tmp_path)
    return folder


def test_loop_page_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example on the loop page runs and stops with the two relevant documents kept."""
    path = ROOT / "docs" / "loop.md"
    monkeypatch.chdir(tmp_path)
    namespace = _run(_python_block(path, "## The corrective loop"), path)
    assert ("a", "b") == namespace["result"].kept_ids  # type: ignore[attr-defined]
    assert (tmp_path / "runs.jsonl").exists()


def test_readme_llm_example_runs_against_a_server(my_docs: Path) -> None:
    """The README's LLM example, pointed at the scripted server, answers with a citation."""
    code = _python_block(README, "### With an LLM")
    assert "http://127.0.0.1:8080/v1" in code
    with ScriptedLLMServer() as server:
        namespace = _run(code.replace("http://127.0.0.1:8080/v1", server.base_url), README)
        assert server.request_count >= 2
    answer = namespace["result"].answer  # type: ignore[attr-defined]
    assert "Ganymede is the largest moon of Jupiter." == answer.text
    assert any("ganymede" in cited for cited in answer.cited_ids)


def test_readme_offline_example_keeps_the_answering_document(my_docs: Path) -> None:
    """The README's offline example keeps the Ganymede document, with no server at all."""
    namespace = _run(_python_block(README, "### Offline"), README)
    kept = [k.document.id for k in namespace["result"].kept]  # type: ignore[attr-defined]
    assert any("ganymede" in doc_id for doc_id in kept)
    assert not any("bread" in doc_id for doc_id in kept)


DOC_PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", DOC_PAGES, ids=lambda p: p.name)
def test_every_import_in_the_docs_resolves(path: Path) -> None:
    """Each `from corrective_rag... import name` in a page's Python blocks names a real object."""
    for code in re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
        for node in ast.walk(ast.parse(code)):
            name = node.module if isinstance(node, ast.ImportFrom) else None
            if name and name.startswith("corrective_rag"):
                module = importlib.import_module(name)
                for alias in node.names:  # type: ignore[attr-defined]
                    assert hasattr(module, alias.name), f"{name}.{alias.name}"


@pytest.mark.parametrize("path", DOC_PAGES, ids=lambda p: p.name)
def test_docs_name_nothing_a_user_does_not_have(path: Path) -> None:
    """No page names local data paths, in-house tools or the machine the figures came from."""
    text = path.read_text(encoding="utf-8")
    for banned in ("../shared", "/work/", "duplicates --change", "shared with other jobs"):
        assert banned not in text, banned


def test_readme_is_a_short_page() -> None:
    """README.md stays a user's page of at most 250 lines; details live in docs/."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_readme_examples_type_check_strictly(tmp_path: Path) -> None:
    """README's Python examples pass mypy --strict: a user copying them gets no type error."""
    api = pytest.importorskip("mypy.api")
    files = []
    for number, heading in enumerate(["### With an LLM", "### Offline"]):
        example = tmp_path / f"example{number}.py"
        example.write_text(_python_block(README, heading), encoding="utf-8")
        files.append(str(example))
    out, err, status = api.run(
        ["--strict", "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"), *files]
    )
    assert 0 == status, out + err
