import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from runs_helpers import ScriptedFactory

from corrective_rag.errors import ConfigError
from corrective_rag.runs.execution.batch import run_batch
from corrective_rag.runs.execution.queries import Query
from corrective_rag.runs.records.results import read_results
from corrective_rag.testing import ScriptedLLMServer
from corrective_rag.testing.replies import default_reply

ray = pytest.importorskip("ray", reason="needs the ray extra: pip install 'corrective_rag[ray]'")

from corrective_rag.runs.execution.ray_engine import RayEngine, start_local_ray  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]
# Workers import the test helpers (the picklable factory) and this checkout of the package.
ENV = {"env_vars": {"PYTHONPATH": os.pathsep.join([str(TESTS), str(REPO)])}}

pytestmark = pytest.mark.slow

QUESTIONS = [
    "are python lists mutable sequences",
    "can a tuple be a dictionary key",
    "which statement makes generators lazy",
    "what does the GIL let threads do",
    "please fail on this one",
    "union and intersection of sets",
    "dictionaries keep insertion order",
    "zebra migration patterns",  # matches nothing: another stop reason
]


@pytest.fixture(scope="module")
def cluster():
    """A local Ray instance with two CPUs, shared by this module's tests."""
    start_local_ray(ray, num_cpus=2, runtime_env=ENV)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def test_local_ray_listens_on_loopback_only(cluster):
    """The local node (the tests' cluster, and RayEngine's own) is 127.0.0.1, not the machine's
    external address, so no batch traffic leaves loopback."""
    assert ["127.0.0.1"] == [node["NodeManagerAddress"] for node in ray.nodes()]
    assert cluster.startswith("127.0.0.1:")


def _queries(texts=QUESTIONS) -> list[Query]:
    return [Query(f"q{i:02d}", text) for i, text in enumerate(texts)]


def _outcome(path: Path) -> dict[str, tuple[str, str | None]]:
    return {
        r.id: (r.status, r.result.stop_reason.value if r.result else None)
        for r in read_results(path)
    }


def _batch(queries, factory, out, engine=None):
    return run_batch(
        queries, runner_factory=factory, out_path=out, concurrency=2, progress=False, engine=engine
    )


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


def test_ray_engine_writes_the_same_results_as_threads(cluster, tmp_path):
    """Two Ray workers give the same ids, statuses and stop reasons as two threads."""
    with ScriptedLLMServer() as server:
        factory = ScriptedFactory(server.base_url)
        threads = _batch(_queries(), factory, tmp_path / "t.jsonl")
        on_ray = _batch(_queries(), factory, tmp_path / "r.jsonl", RayEngine())
    assert _outcome(tmp_path / "t.jsonl") == _outcome(tmp_path / "r.jsonl")
    assert (len(QUESTIONS) - 1, 1) == (on_ray.ok, on_ray.failures)
    assert threads.stop_reasons == on_ray.stop_reasons
    assert sorted(_ids(tmp_path / "r.jsonl")) == sorted(_ids(tmp_path / "t.jsonl"))


def test_a_worker_killed_mid_question_reruns_it_once(cluster, tmp_path):
    """A worker SIGKILLed mid-question is restarted, its question reruns and is written once."""
    marker = tmp_path / "crashed"
    texts = [*QUESTIONS[:3], "crash while answering about tuples", *QUESTIONS[5:]]
    with ScriptedLLMServer() as server:
        summary = _batch(
            _queries(texts),
            ScriptedFactory(server.base_url, str(marker)),
            tmp_path / "r.jsonl",
            RayEngine(),
        )
    assert marker.exists()  # the worker did die once
    ids = _ids(tmp_path / "r.jsonl")
    assert sorted(q.id for q in _queries(texts)) == sorted(ids)  # every id once: none duplicated
    assert (len(texts), 0) == (summary.ok, summary.failures)


def test_a_question_that_always_kills_its_worker_gets_an_error_line(cluster, tmp_path):
    """With no reruns allowed, a question whose worker dies is an error line; the rest finish."""
    texts = [QUESTIONS[0], "crash every time", QUESTIONS[1]]
    with ScriptedLLMServer() as server:
        summary = _batch(
            _queries(texts),
            ScriptedFactory(server.base_url, str(tmp_path / "crashed")),
            tmp_path / "r.jsonl",
            RayEngine(task_retries=0),
        )
    records = {r.id: r for r in read_results(tmp_path / "r.jsonl")}
    assert (2, 1) == (summary.ok, summary.failures)
    assert not records["q01"].ok
    assert "Actor" in records["q01"].error["type"]


DRIVER = textwrap.dedent(
    """
    import json, signal, sys
    # Set explicitly: a suite started from a background job hands its children an ignored SIGINT.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from runs_helpers import ScriptedFactory
    from corrective_rag.runs.execution.batch import run_batch
    from corrective_rag.runs.execution.queries import Query
    from corrective_rag.runs.execution.ray_engine import RayEngine

    address, base_url, out, env = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    texts = json.loads(sys.argv[5])
    queries = [Query(f"q{i:02d}", t) for i, t in enumerate(texts)]
    run_batch(queries, runner_factory=ScriptedFactory(base_url), out_path=out, concurrency=2,
              progress=False, engine=RayEngine(address, runtime_env=env))
    """
)


def _driver(cluster, server, out, texts):
    env = dict(os.environ, PYTHONPATH=ENV["env_vars"]["PYTHONPATH"])
    args = [cluster, server.base_url, str(out), json.dumps(ENV), json.dumps(texts)]
    return subprocess.Popen([sys.executable, "-c", DRIVER, *args], env=env)


def test_ctrl_c_writes_the_running_questions_and_starts_no_more(cluster, tmp_path):
    """On SIGINT the driver waits for both running questions, writes them, and starts no other."""
    release = threading.Event()
    held = threading.Semaphore(0)

    def reply(request):
        if "hold the line" in json.dumps(request):
            held.release()
            release.wait(120)  # both workers stay busy until the driver has been interrupted
        return default_reply(request)

    texts = ["hold the line about lists", "hold the line about tuples", *QUESTIONS[:4]]
    out = tmp_path / "r.jsonl"
    with ScriptedLLMServer(reply=reply) as server:
        driver = _driver(cluster, server, out, texts)
        try:
            for _ in range(2):  # a server-side event: each worker is inside a held question
                assert held.acquire(timeout=120), "the held questions never reached the server"
            driver.send_signal(signal.SIGINT)
        finally:
            release.set()
        assert 0 != driver.wait(120)
    assert ["q00", "q01"] == sorted(_ids(out))


def test_resume_after_the_driver_is_killed(cluster, tmp_path):
    """A driver SIGKILLed mid-batch loses only unfinished questions; a rerun writes each once."""
    release = threading.Event()

    def reply(request):
        if "hold the line" in json.dumps(request):
            release.wait(120)  # held until the driver is dead: the batch cannot finish first
        return default_reply(request)

    texts = ["hold the line about lists", *QUESTIONS[:4], *QUESTIONS[5:]]
    out = tmp_path / "r.jsonl"
    with ScriptedLLMServer(reply=reply) as server:
        driver = _driver(cluster, server, out, texts)
        try:
            # Wait (on the file, not the clock) until every question but the held one is written.
            while not out.exists() or len(out.read_text().splitlines()) < len(texts) - 1:
                assert driver.poll() is None, "the driver ended before it was killed"
                threading.Event().wait(0.05)
            driver.send_signal(signal.SIGKILL)
            driver.wait()
        finally:
            release.set()
            if driver.poll() is None:
                driver.kill()
        before = _ids(out)
        assert "q00" not in before
        summary = _batch(_queries(texts), ScriptedFactory(server.base_url), out, RayEngine())
    ids = _ids(out)
    assert sorted(q.id for q in _queries(texts)) == sorted(ids)
    assert before == ids[: len(before)]
    assert (len(texts), len(texts) - 1) == (summary.ok + summary.failures, summary.skipped)


def test_an_engine_needs_a_factory_and_checks_its_arguments(tmp_path):
    """run_one cannot travel to workers, and bad engine settings are ConfigErrors."""
    with pytest.raises(ConfigError, match="runner_factory"):
        run_batch(_queries(), lambda q: None, out_path=tmp_path / "r.jsonl", engine=RayEngine())
    for bad in ({"address": ""}, {"num_cpus": -1}, {"task_retries": -1}, {"task_retries": True}):
        with pytest.raises(ConfigError):
            RayEngine(**bad)


def test_cli_batch_on_ray_refuses_a_store_folder_for_the_right_reason(tmp_path, capsys):
    """`batch --ray` with a --store folder is a one-line usage error naming the real reason (other
    nodes cannot open a folder on this disk), not a lock readers never take."""
    from corrective_rag.cli.main import main

    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "a", "query": "x"}\n')
    args = ["batch", str(queries), "--out", str(tmp_path / "r.jsonl"), "--store", str(tmp_path)]
    assert 2 == main([*args, "--ray"])
    err = capsys.readouterr().err
    assert "--ray needs a store server" in err
    assert "locked" not in err


def test_ray_workers_run_the_judge_the_profile_chose(cluster, tmp_path):
    """The judge profile read where the batch starts travels in the options to the workers: a
    worker (which reads no profile file) judges by probability at the profile's threshold,
    where without the profile it judges by the written verdicts."""
    from judge_replies import Written, graded_judge

    from corrective_rag.cli.main import main
    from corrective_rag.cli.wiring import Options, RunnerFactory
    from corrective_rag.evaluate import JudgeProfile

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "moons.txt").write_text("Ganymede is the largest moon of Jupiter.")
    assert 0 == main(["index", str(tmp_path / "docs"), "--store", str(tmp_path / "store")])
    profile = JudgeProfile.of("logprob", model="scripted", threshold=0.9)
    sources = {}
    with ScriptedLLMServer(faults=graded_judge(lambda q, d: Written(True, 0.9, 0.9, 0.8))) as srv:
        for how, judge in (("none", None), ("profile", profile)):
            opts = Options(
                store=str(tmp_path / "store"), llm_url=srv.base_url, model="scripted", judge=judge
            )
            out = tmp_path / f"{how}.jsonl"
            _batch(_queries(["largest moon of Jupiter"]), RunnerFactory(opts), out, RayEngine())
            (record,) = read_results(out)
            sources[how] = {v.score_source for r in record.result.history for v in r.verdicts}
    assert {"none": {"verbal"}, "profile": {"logprob"}} == sources
