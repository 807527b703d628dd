"""The MCP SDK is optional: without it the package imports and ``mcp`` says what to install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_without_the_sdk_the_package_imports_and_the_command_names_the_extra(tmp_path):
    """With ``mcp`` unimportable, the package and the CLI import, and ``corrective-rag mcp``
    exits 2 with one line naming ``corrective_rag[mcp]``."""
    script = (
        "import sys; sys.modules['mcp'] = None\n"
        "import corrective_rag, corrective_rag.cli.commands, corrective_rag.cli.mcp_server\n"
        "from corrective_rag.cli.main import main\n"
        f"sys.exit(main(['mcp', '--store', {str(tmp_path)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert 2 == done.returncode, done.stderr
    assert "pip install 'corrective_rag[mcp]'" in done.stderr
    assert 1 == len(done.stderr.strip().splitlines())


def test_without_a_store_flag_the_command_is_a_usage_error(capsys):
    """``corrective-rag mcp`` with no store flag exits 2 at once (a store that is named but
    missing is the agent's tool error instead)."""
    from corrective_rag.cli.main import main

    assert 2 == main(["mcp"])
    assert "give --store DIR" in capsys.readouterr().err


def _options(parser, argv):
    from corrective_rag.cli.options import options

    return options(parser.parse_args(argv))


def test_mcp_takes_every_flag_run_takes_and_builds_the_same_loop():
    """Every flag of ``run`` but its output ones (``--json``, ``--no-progress``) is a flag of
    ``mcp`` too, and the same flags give both the same ``Options``, from which the server
    builds its loop as ``run`` does (``wiring.orchestrator``): a judge or loop setting added to
    ``run`` reaches the MCP server, or this test says it does not."""
    from corrective_rag.cli.main import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")

    def flags(name: str) -> set[str]:
        return {o for a in commands.choices[name]._actions for o in a.option_strings}

    assert {"--json", "--no-progress"} == flags("run") - flags("mcp")
    given = ["--store", "s", "--llm-url", "http://127.0.0.1:9/v1", "--model", "m"]
    given += ["--policy", "strict", "--max-iterations", "2", "--top-k", "7", "--timeout", "9"]
    given += ["--fallback-store", "f", "--max-retries", "1", "--min-relevant", "2"]
    assert _options(parser, ["run", "q", *given]) == _options(parser, ["mcp", *given])
