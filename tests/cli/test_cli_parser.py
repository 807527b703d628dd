"""The command line's parser speaks for the subcommand the user typed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corrective_rag.cli.main import build_parser, main
from corrective_rag.runs.execution.queries import read_queries


@pytest.mark.parametrize(
    "argv",
    [
        ["-v", "run", "q"],
        ["run", "q", "-v"],
        ["run", "-v", "q"],
        ["history", "list", "r.jsonl", "--verbose"],
        ["batch", "q.jsonl", "--out", "o.jsonl", "-v"],
    ],
)
def test_verbose_is_accepted_before_and_after_the_command(argv: list[str]) -> None:
    """-v turns verbose logging on wherever it stands."""
    assert True is build_parser().parse_args(argv).verbose


def test_verbose_defaults_to_off_after_the_command() -> None:
    """A subcommand without -v does not switch off a -v given before it."""
    assert False is build_parser().parse_args(["run", "q"]).verbose
    assert True is build_parser().parse_args(["-v", "run", "q"]).verbose


def test_an_unknown_flag_points_to_the_subcommand_help_and_suggests(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`run --topk 3` names `corrective-rag run --help` and suggests --top-k."""
    assert 2 == main(["run", "q", "--topk", "3"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: --topk 3" in err
    assert "did you mean --top-k?" in err
    assert "(see corrective-rag run --help)" in err


def test_a_flag_unlike_any_gets_no_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    """No made-up suggestion for a flag that resembles nothing."""
    assert 2 == main(["history", "show", "r.jsonl", "q1", "--bogus"])
    err = capsys.readouterr().err
    assert "did you mean" not in err
    assert "(see corrective-rag history show --help)" in err


def test_timeout_error_states_the_real_rule(capsys: pytest.CaptureFixture[str]) -> None:
    """--timeout 1e9 is refused with the rule it broke, not 'must be positive'."""
    assert 2 == main(["run", "q", "--timeout", "1e9"])
    err = capsys.readouterr().err
    assert "less than 1,000,000 seconds" in err
    assert "positive number" not in err


def test_a_queries_file_with_a_byte_order_mark_reads(tmp_path: Path) -> None:
    """A UTF-8 BOM (Notepad, PowerShell) is not part of the first line's JSON."""
    path = tmp_path / "queries.jsonl"
    lines = [json.dumps({"id": "q1", "query": "first"}), json.dumps({"id": "q2", "query": "x"})]
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode())
    assert ["q1", "q2"] == [q.id for q in read_queries(path)]


@pytest.mark.parametrize(
    "flags",
    [
        ["--llm-url", "http://127.0.0.1:9/v1", "--model", "m"],
        ["--local-llm", "m.gguf"],
        ["--max-iterations", "3"],
        ["--top-k", "4"],
        ["--policy", "medical"],
        ["--timeout", "5"],
        ["--judge-cap", "2"],
        ["--fallback", "searxng"],
    ],
)
def test_index_refuses_the_flags_of_a_run(
    flags: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`index` takes the store's flags only: a run's flag is a usage error naming `index`, and
    nothing is indexed."""
    assert 2 == main(["index", str(tmp_path), "--store", str(tmp_path / "s"), *flags])
    err = capsys.readouterr().err
    assert err.startswith(f"corrective-rag: error: unrecognized arguments: {flags[0]}")
    assert "corrective-rag index --help" in err
    assert not (tmp_path / "s").exists()


def test_index_still_takes_the_store_flags() -> None:
    """The store's flags parse for index, and the options a run reads keep their defaults."""
    args = build_parser().parse_args(
        ["index", "docs", "--qdrant", "http://127.0.0.1:6333", "--chroma-port", "9000"]
    )
    assert ("http://127.0.0.1:6333", 9000, None) == (args.qdrant, args.chroma_port, args.store)
    assert (None, None, 5, 3) == (args.llm_url, args.model, args.top_k, args.max_iterations)
