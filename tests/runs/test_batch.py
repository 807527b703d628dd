import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from runs_helpers import make_result, slow_run

from corrective_rag.errors import ConfigError, InputError, LLMTransportError
from corrective_rag.runs.execution.batch import run_batch
from corrective_rag.runs.execution.queries import Query, in_shard, parse_shard, read_queries
from corrective_rag.runs.records.results import (
    error_line,
    latest_records,
    ok_line,
    read_results,
    repair_torn_tail,
)
from corrective_rag.runs.reports.summary import mean, summarize
from corrective_rag.types import StopReason

REPO = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]


def _write_queries(path: Path, n: int, *, fail_every: int = 0) -> list[str]:
    ids = []
    with path.open("w") as fh:
        for i in range(n):
            text = f"question {i}" + (" fail" if fail_every and i % fail_every == 0 else "")
            fh.write(json.dumps({"id": f"q{i:03d}", "query": text, "topic": "t"}) + "\n")
            ids.append(f"q{i:03d}")
    return ids


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "a", "query": "x"}\n{"id": "b", "query": \n', "line 2: not valid JSON"),
        ('{"id": "a", "query": "x"}\n\n{"query": "y"}\n', "line 3: missing or empty 'id'"),
        ('{"id": "a", "query": "  "}\n', "line 1: missing or empty 'query'"),
        ('{"id": "a", "query": "x"}\n{"id": "a", "query": "y"}\n', "line 2: duplicate id 'a'"),
        ('["a", "x"]\n', "line 1: expected a JSON object"),
    ],
)
def test_read_queries_names_the_bad_line(tmp_path, content, message):
    """Every kind of malformed queries line is refused with its line number."""
    path = tmp_path / "q.jsonl"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        read_queries(path)


def test_read_queries_accepts_beir_fields_and_keeps_extras(tmp_path):
    """BEIR's _id/text fields are read, numeric ids become strings, extra fields are kept."""
    path = tmp_path / "q.jsonl"
    path.write_text('{"_id": 7, "text": "what?", "metadata": {}}\n\n{"id": "b", "query": "y"}\n')
    queries = read_queries(path)
    assert [Query("7", "what?", 1, {"metadata": {}}), Query("b", "y", 3)] == queries


def test_parse_shard_and_shards_partition_ids():
    """Shards are disjoint and cover every id, and bad shard text is a ConfigError."""
    assert (1, 4) == parse_shard("1/4")
    for bad in ("4/4", "1", "a/b", "-1/2", "0/0"):
        with pytest.raises(ConfigError):
            parse_shard(bad)
    ids = [f"id{i}" for i in range(200)]
    owners = [[s for s in range(4) if in_shard(i, (s, 4))] for i in ids]
    assert all(len(o) == 1 for o in owners)
    assert all(20 < sum(o == [s] for o in owners) < 80 for s in range(4))


def test_mean_matches_hand_computed_values():
    """The mean of four values is their sum over four; an empty mean is NaN."""
    assert 2.5 == mean([4.0, 1.0, 3.0, 2.0])
    assert math.isnan(mean([]))


def test_summarize_counts_hand_built_runs(tmp_path):
    """The summary of three hand-built runs and one error equals the hand-computed figures."""
    out = tmp_path / "r.jsonl"
    runs = {
        "a": make_result("a", kept_per_iteration=(3,)),  # 1 iteration, no rewrite
        "b": make_result(
            "b", kept_per_iteration=(1, 1, 1), stop=StopReason.ITERATION_CAP, fallback_at=2
        ),
        "c": make_result("c", kept_per_iteration=(1, 2)),
    }
    with out.open("w") as fh:
        for (qid, res), secs in zip(runs.items(), (1.0, 3.0, 2.0), strict=True):
            fh.write(json.dumps(ok_line(qid, qid, res, secs)) + "\n")
        fh.write(json.dumps(error_line("d", "d", LLMTransportError("down"), 0.5)) + "\n")
    summary = summarize(read_results(out), ids=["a", "b", "c", "d", "e"])
    assert (5, 3, 1, 1) == (summary.queries, summary.ok, summary.failures, summary.missing)
    assert {"enough_relevant": 2, "iteration_cap": 1} == dict(summary.stop_reasons)
    assert {"LLMTransportError": 1} == dict(summary.error_types)
    assert pytest.approx(2.0) == summary.mean_iterations  # (1 + 3 + 2) / 3
    assert pytest.approx(2 / 3) == summary.rewrite_rate
    assert pytest.approx(1 / 3) == summary.fallback_rate
    assert 2.0 == summary.latency_p50
    assert pytest.approx(2.9) == summary.latency_p95  # position 1.9 in 1,2,3
    # grading: 2 calls per iteration over 6 iterations; rewriting: 1 per rewrite, 3 rewrites
    assert 12 == summary.usage_by_phase["grading"]["llm_calls"]
    assert 3 == summary.usage_by_phase["rewriting"]["llm_calls"]
    assert 15 == summary.llm_calls
    assert pytest.approx(6 * 0.002 + 3 * 0.001) == summary.cost_usd
    assert 6 * 120 + 3 * 60 == summary.total_tokens
    json.dumps(summary.to_dict(), allow_nan=False)


def test_batch_writes_one_line_per_query_and_goes_on_after_failures(tmp_path):
    """Ok and failing queries each get exactly one line and the summary counts both."""
    queries = tmp_path / "q.jsonl"
    ids = _write_queries(queries, 12, fail_every=4)
    out = tmp_path / "out" / "r.jsonl"
    summary = run_batch(queries, slow_run, out_path=out, concurrency=3, progress=False)
    lines = _lines(out)
    assert sorted(ids) == sorted(line["id"] for line in lines)
    failed = {line["id"] for line in lines if line["status"] == "error"}
    assert {"q000", "q004", "q008"} == failed
    assert (12, 9, 3, 0) == (summary.queries, summary.ok, summary.failures, summary.skipped)
    err = next(line for line in lines if line["status"] == "error")["error"]
    assert "RuntimeError" == err["type"]
    ok = next(line for line in lines if line["status"] == "ok")
    assert 2 == len(ok["result"]["history"])


def test_resume_skips_done_ids_and_reruns_errors_unless_told(tmp_path):
    """A rerun skips ok ids, runs error ids again by default, and skips them on request."""
    queries = tmp_path / "q.jsonl"
    _write_queries(queries, 6, fail_every=3)
    out = tmp_path / "r.jsonl"
    run_batch(queries, slow_run, out_path=out, concurrency=2, progress=False)
    calls: list[str] = []

    def counting(q: str):
        calls.append(q)
        return slow_run(q, 0.0)

    again = run_batch(queries, counting, out_path=out, concurrency=2, progress=False)
    assert ["question 0 fail", "question 3 fail"] == sorted(calls)
    assert (4, 2) == (again.skipped, again.failures)
    calls.clear()
    third = run_batch(queries, counting, out_path=out, progress=False, rerun_errors=False)
    assert ([], 6) == (calls, third.skipped)


def _same_summary(a, b) -> None:
    """Two summaries agree on everything but the wall time (NaN equals NaN)."""
    left, right = a.to_dict(), b.to_dict()
    left.pop("wall_seconds"), right.pop("wall_seconds")
    assert left == right


def test_summary_equals_the_results_file_read_back_after_a_resume(tmp_path):
    """The summary of a resumed, sharded batch is what the file says, last line per id winning.

    Earlier error lines rerun now, earlier ok lines skipped, ids of another shard in the file:
    each must count as reading the file back would count it.
    """
    queries = tmp_path / "q.jsonl"
    _write_queries(queries, 18, fail_every=3)
    out = tmp_path / "r.jsonl"
    run_batch(queries, lambda q: slow_run(q, 0.0), out_path=out, progress=False)
    shard = (0, 2)
    mine = [q.id for q in read_queries(queries) if in_shard(q.id, shard)]

    def heal(q: str):
        return slow_run(q.replace(" fail", ""), 0.0)

    again = run_batch(queries, heal, out_path=out, shard=shard, concurrency=3, progress=False)
    assert 0 < again.skipped < len(mine) and 0 == again.failures
    back = summarize(read_results(out), ids=mine, skipped=again.skipped)
    _same_summary(again, back)


def test_a_finished_batch_does_not_decode_its_own_results_again(tmp_path, monkeypatch):
    """The summary comes from the results this run holds, not from the file decoded again.

    Decoding a line costs about as much as the query's own bookkeeping (benchmarks/batch.py):
    a fresh batch decodes no RunResult at all.
    """
    from corrective_rag.runs.records import codec

    decoded: list[object] = []
    real = codec.from_dict

    def counting(cls, data, *args, **kwargs):
        if cls.__name__ == "RunResult":
            decoded.append(data)
        return real(cls, data, *args, **kwargs)

    monkeypatch.setattr("corrective_rag.runs.records.results.from_dict", counting)
    queries = tmp_path / "q.jsonl"
    _write_queries(queries, 8, fail_every=4)
    out = tmp_path / "r.jsonl"
    summary = run_batch(queries, slow_run, out_path=out, concurrency=2, progress=False)
    assert [] == decoded
    assert (8, 6, 2) == (summary.queries, summary.ok, summary.failures)
    _same_summary(summary, summarize(read_results(out), ids=[f"q{i:03d}" for i in range(8)]))
    assert 6 == len(decoded)  # the read-back just above did decode them: the spy works


def test_runner_factory_gives_each_thread_its_own_callable(tmp_path):
    """With runner_factory, one callable is built per worker thread and never shared."""
    queries = tmp_path / "q.jsonl"
    _write_queries(queries, 16)
    owners: dict[int, set[int]] = {}
    lock = threading.Lock()

    def factory():
        def run(q: str):
            with lock:
                owners.setdefault(id(run), set()).add(threading.get_ident())
            return slow_run(q, 0.01)

        return run

    summary = run_batch(
        queries,
        runner_factory=factory,
        out_path=tmp_path / "r.jsonl",
        concurrency=4,
        progress=False,
    )
    assert 16 == summary.ok
    assert 1 <= len(owners) <= 4
    assert all(1 == len(threads) for threads in owners.values())


def test_shards_split_one_batch_without_overlap(tmp_path):
    """Three shards written to three files together hold every id exactly once."""
    queries = tmp_path / "q.jsonl"
    ids = _write_queries(queries, 30)
    seen = []
    for i in range(3):
        out = tmp_path / f"r{i}.jsonl"
        run_batch(queries, lambda q: slow_run(q, 0.0), out_path=out, shard=(i, 3), progress=False)
        seen += [line["id"] for line in _lines(out)]
    assert sorted(ids) == sorted(seen)


def test_run_batch_validates_arguments(tmp_path):
    """Bad concurrency, both or neither runner, and a bad shard are ConfigErrors."""
    qs = [Query("a", "x")]
    out = tmp_path / "r.jsonl"
    with pytest.raises(ConfigError, match="concurrency"):
        run_batch(qs, slow_run, out_path=out, concurrency=0)
    with pytest.raises(ConfigError, match="exactly one"):
        run_batch(qs, out_path=out)
    with pytest.raises(ConfigError, match="shard"):
        run_batch(qs, slow_run, out_path=out, shard=(3, 3))


def test_torn_last_line_is_cut_on_resume(tmp_path):
    """A half-written last line is removed on resume and its query is run again."""
    queries = tmp_path / "q.jsonl"
    _write_queries(queries, 3)
    out = tmp_path / "r.jsonl"
    run_batch(queries, lambda q: slow_run(q, 0.0), out_path=out, progress=False)
    whole = out.read_bytes().split(b"\n")
    out.write_bytes(b"\n".join(whole[:2]) + b"\n" + whole[2][: len(whole[2]) // 2])
    assert 2 == len(read_results(out))  # the torn line is ignored when reading
    summary = run_batch(queries, lambda q: slow_run(q, 0.0), out_path=out, progress=False)
    assert (3, 2) == (summary.ok, summary.skipped)
    assert 3 == len(_lines(out))
    assert 0 == repair_torn_tail(out)


def test_a_corrupt_complete_line_is_reported_not_overwritten(tmp_path):
    """A complete line that is not JSON (not a crash artefact) stops the resume with its line."""
    out = tmp_path / "r.jsonl"
    out.write_text("garbage\n")
    with pytest.raises(InputError, match="line 1"):
        run_batch([Query("a", "x")], slow_run, out_path=out, progress=False)
    assert "garbage\n" == out.read_text()


# The first GATE queries finish; every later one blocks for good, so the batch is still running
# when the signal lands however slow the machine (it used to finish first under load).
GATE = 40
CHILD = textwrap.dedent(
    f"""
    import signal, sys, threading
    # Set explicitly: a suite started from a background job hands its children an ignored SIGINT.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from corrective_rag.runs.execution.batch import run_batch
    from runs_helpers import slow_run
    lock, started = threading.Lock(), [0]
    def run_one(q):
        with lock:
            started[0] += 1
            blocked = started[0] > {GATE}
        if blocked:
            threading.Event().wait()
        return slow_run(q, 0.0)
    try:
        run_batch(sys.argv[1], run_one, out_path=sys.argv[2], concurrency=4, progress=False)
    except KeyboardInterrupt:
        sys.exit(130)
    """
)


def _start_child(tmp_path: Path, queries: Path, out: Path) -> subprocess.Popen:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(TESTS)]))
    return subprocess.Popen([sys.executable, str(script), str(queries), str(out)], env=env)


def _wait_for_lines(out: Path, n: int, proc: subprocess.Popen) -> None:
    while proc.poll() is None:  # the pytest timeout bounds a child that stalls
        if out.exists() and out.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.01)
    raise AssertionError("child finished or stalled before the kill point")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killed_batch_resumes_with_no_loss_and_no_duplicates(tmp_path, sig):
    """A batch killed mid-run (SIGKILL or Ctrl-C) resumes to every id exactly once."""
    queries = tmp_path / "q.jsonl"
    ids = _write_queries(queries, 400)
    out = tmp_path / "r.jsonl"
    proc = _start_child(tmp_path, queries, out)
    _wait_for_lines(out, GATE, proc)
    proc.send_signal(sig)
    code = proc.wait(timeout=60)
    assert (-signal.SIGKILL if sig == signal.SIGKILL else 130) == code
    before = read_results(out)
    assert GATE == sum(rec.ok for rec in before)
    assert len(before) == len({rec.id for rec in before})
    if sig == signal.SIGINT:  # Ctrl-C ends on a whole line; the 4 running ones are interrupted
        assert out.read_bytes().endswith(b"\n")
        assert 4 == sum(not rec.ok and rec.error["type"] == "interrupted" for rec in before)
    summary = run_batch(queries, lambda q: slow_run(q, 0.0), out_path=out, progress=False)
    after = [rec.id for rec in latest_records(read_results(out))]
    assert sorted(ids) == sorted(after)
    assert (400, GATE) == (summary.ok, summary.skipped)


def test_out_pointing_at_a_file_that_is_not_a_results_file_is_refused_unchanged(tmp_path):
    """A notes file or a queries file without a final newline given as --out is never cut."""
    queries = tmp_path / "q.jsonl"
    _write_queries(queries, 1)
    for name, content in (
        ("notes.txt", b"my precious notes\nlast line without newline"),
        ("other.jsonl", b'{"id": "x", "query": "no newline at end"}'),
        ("db.sqlite3", b"SQLite format 3\x00\x10\x00\x01\x01"),
    ):
        out = tmp_path / name
        out.write_bytes(content)
        with pytest.raises(InputError, match="not a results file"):
            run_batch(queries, lambda q: slow_run(q, 0.0), out_path=out, progress=False)
        assert content == out.read_bytes()
