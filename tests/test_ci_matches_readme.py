from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_readme_has_exactly_two_setup_commands():
    """The Quickstart is two commands: the demo and the test suite."""
    commands = _quickstart_commands()
    assert 2 == len(commands)
    assert "corrective_rag demo" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim():
    """.ci/run executes the README's test command, character for character."""
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert _quickstart_commands()[1] in ci_lines
