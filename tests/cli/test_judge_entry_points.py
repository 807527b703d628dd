"""The judge profile is honoured by ``run``, ``batch`` and ``mcp`` (issue 46 item 1).

The profile chosen here is the probability judge at a fitted threshold of 0.9; the server's model
writes every document "relevant, high 0.9, confidence 0.9" and puts 0.8 on each ``true``. So
without the profile (the default verbal judge) every document is kept; with it, every verdict is
decided by its probability (0.8 < 0.9: not relevant, ``score_source="logprob"``) and nothing is
kept. Each test runs the command both ways, so it fails when the profile is ignored.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
import structlog
from judge_replies import Written, graded_judge

from corrective_rag.cli.main import build_parser, main
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate import JudgeProfile
from corrective_rag.evaluate.pointwise import POINTWISE_SYSTEM
from corrective_rag.evaluate.profile import Measured, write_profiles
from corrective_rag.testing import ScriptedLLMServer

QUESTION = "Which moon is the largest moon of Jupiter?"
SURE = graded_judge(lambda q, d: Written(True, 0.9, 0.9, 0.8))
MEASURED = Measured(27, "built-in", 14, 0.8, 0.9, 0.53, "2026-01-01T00:00:00+00:00", "0.1.0")


@pytest.fixture(autouse=True)
def _restore_logging():
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real store with two documents, indexed by ``corrective-rag index``."""
    folder = tmp_path_factory.mktemp("entry")
    (folder / "docs").mkdir()
    (folder / "docs" / "moons.txt").write_text("Ganymede is the largest moon of Jupiter.")
    (folder / "docs" / "rings.txt").write_text("Saturn's largest moon is Titan, with rings near.")
    assert 0 == main(
        ["index", str(folder / "docs"), "--store", str(folder / "store"), "--no-progress"]
    )
    structlog.reset_defaults()
    return folder / "store"


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    """The file judge-check would write: the probability judge at 0.9, chosen for "scripted"."""
    path = tmp_path / "profile.json"
    scored = dataclasses.replace(
        JudgeProfile.of("logprob", model="scripted", threshold=0.9), measured=MEASURED
    )
    write_profiles(path, "scripted", {"logprob": scored}, "logprob")
    return path


def _llm(server: ScriptedLLMServer, store: Path) -> list[str]:
    return ["--store", str(store), "--llm-url", server.base_url, "--model", "scripted"]


def _verdicts(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for record in result["history"] for v in record["verdicts"]]


def test_run_runs_the_judge_the_profile_chose(store, profile_file, capsys, monkeypatch):
    """``run --calibration FILE``, and the same file at the default location: the probability
    judge at 0.9 decides (nothing kept); without a profile the verbal judge keeps both."""
    results = {}
    with ScriptedLLMServer(faults=SURE) as server:
        for how in ("none", "flag", "default"):
            more = ["--calibration", str(profile_file)] if how == "flag" else []
            if how == "default":
                monkeypatch.setenv("CORRECTIVE_RAG_CALIBRATION", str(profile_file))
            assert 0 == main(["run", QUESTION, *_llm(server, store), "--json", *more])
            results[how] = json.loads(capsys.readouterr().out)
    none, flag, default = results["none"], results["flag"], results["default"]
    assert {"verbal"} == {v["score_source"] for v in _verdicts(none)}
    assert none["kept"]
    for result in (flag, default):
        verdicts = _verdicts(result)
        assert {"logprob"} == {v["score_source"] for v in verdicts}
        assert {False} == {v["relevant"] for v in verdicts}
        assert {0.8} == {round(v["probability"], 6) for v in verdicts}
        assert [] == result["kept"]


def test_batch_runs_the_judge_the_profile_chose(store, profile_file, tmp_path, capsys):
    """``batch --calibration FILE``: the results file holds the probability verdicts."""
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"id": "q1", "query": QUESTION}) + "\n")
    sources = {}
    with ScriptedLLMServer(faults=SURE) as server:
        for how, more in (("none", []), ("flag", ["--calibration", str(profile_file)])):
            out = tmp_path / f"{how}.jsonl"
            main(
                [
                    "batch",
                    str(queries),
                    "--out",
                    str(out),
                    "--no-progress",
                    *_llm(server, store),
                    *more,
                ]
            )
            (line,) = [json.loads(x) for x in out.read_text().splitlines()]
            sources[how] = {v["score_source"] for v in _verdicts(line["result"])}
    capsys.readouterr()
    assert {"none": {"verbal"}, "flag": {"logprob"}} == sources


def test_mcp_runs_the_judge_the_profile_chose(store, profile_file):
    """``mcp --calibration FILE``: the options the command builds carry the profile, and the
    search tool's run is judged by it (nothing kept) where without it both are kept."""
    anyio = pytest.importorskip("anyio")
    pytest.importorskip("mcp")
    from mcp import Client

    from corrective_rag.cli.mcp_server import SearchService, build_server
    from corrective_rag.cli.options import options

    found = {}
    with ScriptedLLMServer(faults=SURE) as server:
        for how, more in (("none", []), ("flag", ["--calibration", str(profile_file)])):
            args = build_parser().parse_args(["mcp", *_llm(server, store), *more])
            service = SearchService(options(args))

            async def go(service: SearchService = service) -> Any:
                async with Client(build_server(service)) as client:
                    return await client.call_tool("search", {"question": QUESTION})

            try:
                found[how] = anyio.run(go)
            finally:
                service.close()
    assert not found["none"].is_error and not found["flag"].is_error
    assert found["none"].structured_content["documents"]
    assert [] == found["flag"].structured_content["documents"]


def test_judge_kind_is_run_without_a_profile(store, capsys):
    """``run --judge pointwise``: the yes/no judge asks one question per document."""
    with ScriptedLLMServer(faults=SURE) as server:
        assert 0 == main(["run", QUESTION, *_llm(server, store), "--judge", "pointwise", "--json"])
        systems = [r["messages"][0]["content"] for r in server.requests]
    capsys.readouterr()
    assert POINTWISE_SYSTEM in systems


def test_a_profile_that_does_not_fit_the_run_is_refused_before_anything_loads(
    store, profile_file, tmp_path, capsys
):
    """Another model, an old prompt, or a judge that needs an LLM offline: one error line each,
    exit 2."""
    with ScriptedLLMServer(faults=SURE) as server:
        argv = ["run", QUESTION, "--store", str(store), "--llm-url", server.base_url]
        assert 2 == main([*argv, "--model", "other", "--calibration", str(profile_file)])
        assert "no judge profile for model 'other' (it holds scripted)" in capsys.readouterr().err
        old = tmp_path / "old.json"
        stale = JudgeProfile("logprob", "scripted", "crag-prompts/1", "one-call", 0.6)
        write_profiles(old, "scripted", {"logprob": stale}, "logprob")
        assert 2 == main([*argv, "--model", "scripted", "--calibration", str(old)])
        assert "measured with prompt crag-prompts/1" in capsys.readouterr().err
    assert 2 == main(["run", QUESTION, "--store", str(store), "--judge", "logprob"])
    assert "--judge logprob needs an LLM" in capsys.readouterr().err


def test_options_carry_the_profile_for_ray_workers(store, profile_file):
    """The profile is read once, where the command runs, and travels in the options a Ray
    worker unpickles (tests/runs/test_ray_engine.py runs it on a cluster)."""
    import pickle

    with ScriptedLLMServer() as server:
        args = build_parser().parse_args(
            [
                "batch",
                "q.jsonl",
                "--out",
                "o.jsonl",
                *_llm(server, store),
                "--calibration",
                str(profile_file),
            ]
        )
        from corrective_rag.cli.options import options

        opts = options(args)
    again = pickle.loads(pickle.dumps(opts))
    assert again.judge == JudgeProfile.read(profile_file, model="scripted")
    with pytest.raises(ConfigError):
        JudgeProfile.read(profile_file, model="another")


def test_local_llm_runs_read_the_key_judge_check_local_llm_writes(store, tmp_path):
    """``run --local-llm PATH`` reads the profile kept under the GGUF file's name, the key
    ``judge-check --local-llm PATH`` writes (the last round read the key "local")."""
    from corrective_rag.cli.options import options
    from corrective_rag.cli.wiring import local_model

    gguf = tmp_path / "models" / "tiny-judge.Q4.gguf"
    assert "tiny-judge.Q4.gguf" == local_model(str(gguf))
    path = tmp_path / "profile.json"
    chosen = JudgeProfile.of("pointwise", model="tiny-judge.Q4.gguf", threshold=0.35)
    write_profiles(path, "tiny-judge.Q4.gguf", {"pointwise": chosen}, "pointwise")
    argv = ["run", QUESTION, "--store", str(store), "--local-llm", str(gguf)]
    opts = options(build_parser().parse_args([*argv, "--calibration", str(path)]))
    assert chosen == opts.judge


def test_index_reads_no_judge_profile_and_run_names_a_bad_one(tmp_path, monkeypatch, capsys):
    """A junk file at the profile's default location: ``index`` (which judges nothing) is not
    bothered; ``run`` stops with one line naming the file, before any model loads."""
    junk = tmp_path / "junk.json"
    junk.write_bytes(b"[" * 100_000)
    monkeypatch.setenv("CORRECTIVE_RAG_CALIBRATION", str(junk))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Ganymede is the largest moon of Jupiter.")
    store = tmp_path / "store"
    assert 0 == main(["index", str(tmp_path / "docs"), "--store", str(store), "--no-progress"])
    capsys.readouterr()
    assert 2 == main(["run", QUESTION, "--store", str(store)])
    err = capsys.readouterr().err
    assert str(junk) in err and 1 == len(err.strip().splitlines())


@pytest.mark.parametrize("hostile", ["/dev/zero", "fifo"])
def test_a_device_or_fifo_as_the_profile_is_one_line(hostile, store, tmp_path, monkeypatch, capsys):
    """``CORRECTIVE_RAG_CALIBRATION=/dev/zero`` (or a FIFO nobody writes) and ``run``: one
    line naming it, exit 2 (the last round read /dev/zero to 4.7 GB; a FIFO blocked the run)."""
    path = "/dev/zero"
    if hostile == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    monkeypatch.setenv("CORRECTIVE_RAG_CALIBRATION", path)
    assert 2 == main(["run", QUESTION, "--store", str(store)])
    err = capsys.readouterr().err
    assert f"{path}: a " in err and "not a regular file" in err
    assert 1 == len(err.strip().splitlines())
