"""``judge-check --compare / --pairs``: every judge measured as a run applies it, and the profile
it writes (issue 46 items 2, 4 and 5; issue 48 items 1-3 and 8).

Mutation testing (mutmut on evaluate/check/compare.py with this file and tests/evaluate/):
equivalent survivors, named so that a later run can tell them from new ones:

- ``_UNGRADED = -1.0`` changed to another value below 0: it only has to rank below every score.
- ``DEGENERATE`` moved by a little (0.01 to 0.011): no fitted threshold lies between.
- the advice's and the refusals' wording past the parts the tests read.
"""

from __future__ import annotations

import json
import os
import threading

import pytest
import structlog
from judge_replies import Written, graded_judge, ranking_judge

from corrective_rag.cli.main import main
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate import JudgeProfile, get_policy
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.check.compare import compare_judges, split_pairs
from corrective_rag.evaluate.check.fit import f1
from corrective_rag.evaluate.check.pairs import CHECK_PAIRS, CheckPair, read_pairs
from corrective_rag.evaluate.policy import Decision, decide
from corrective_rag.evaluate.profile import read_profiles
from corrective_rag.llm.client import OpenAIChatClient, Retries
from corrective_rag.testing import Fault, ScriptedLLMServer
from corrective_rag.testing.judges import all_relevant_judge
from corrective_rag.types import Document

LABELS = {p.document.id: p.relevant for p in CHECK_PAIRS}


@pytest.fixture(autouse=True)
def _restore_logging():
    yield
    structlog.reset_defaults()


@pytest.fixture
def profile_file(tmp_path, monkeypatch):
    path = tmp_path / "profile.json"
    monkeypatch.setenv("CORRECTIVE_RAG_CALIBRATION", str(path))
    return path


def _check(server: ScriptedLLMServer, *more: str) -> list[str]:
    return ["judge-check", "--llm-url", server.base_url, "--model", "scripted", *more]


def _user_pairs() -> tuple[CheckPair, ...]:
    """A user's own pairs: six questions about moons, titled documents, two relevant each."""
    pairs = []
    for q in range(6):
        question = f"Which moon of planet {q} has the thickest atmosphere?"
        for d in range(4):
            ident = f"moon-{q}-{d}"
            title = f"Moon {q}.{d}"
            text = f"Moon {q}.{d} orbits planet {q}; its surface and air were surveyed."
            pairs.append(
                CheckPair(question, Document(ident, f"{title}\n{text}", {"title": title}), d < 2)
            )
    return tuple(pairs)


def _write_pairs(pairs, path) -> str:
    rows = []
    for p in pairs:
        title = p.document.metadata.get("title", "")
        text = p.document.text.split("\n", 1)[-1] if title else p.document.text
        row = {"question": p.question, "text": text, "relevant": p.relevant, "id": p.document.id}
        if title:
            row["title"] = title
        rows.append(json.dumps(row))
    path.write_text("\n".join(rows) + "\n\n", encoding="utf-8")
    return str(path)


def _run_f1(pairs, profile: JudgeProfile, url: str) -> float:
    """F1 of what a run's evaluator with ``profile`` keeps on the held-out questions' pairs:
    the evaluator built from the profile, as every entry point builds it, one evaluate call per
    question, kept or not by the general policy."""
    chat = OpenAIChatClient(url, "scripted", retries=Retries(max_retries=0))
    options = {"cache": VerdictCache(0)} if profile.kind in ("verbal", "logprob") else {}
    evaluator = profile.evaluator(chat=chat, **options)
    _, held = split_pairs(pairs)
    kept, labels = [], []
    for question in dict.fromkeys(pairs[i].question for i in held):
        group = [p for p in pairs if p.question == question]
        verdicts = evaluator.evaluate(question, [p.document for p in group]).verdicts
        kept += [decide(v, get_policy("general")) is Decision.KEEP for v in verdicts]
        labels += [p.relevant for p in group]
    return f1(kept, labels)


@pytest.mark.parametrize("source", ["built-in", "user"])
def test_the_held_out_f1_printed_is_the_runs_on_those_pairs(source, profile_file, tmp_path, capsys):
    """For the built-in pairs and a user's --pairs file: the held-out F1 judge-check prints for
    each judge equals, to 0.01, the F1 of what a run's evaluator built from the profile it wrote
    keeps on the same held-out pairs. The probability judge is chosen, its threshold fitted
    away from 0.5, graded in the run's one-call shape."""
    pairs = CHECK_PAIRS if source == "built-in" else _user_pairs()
    labels = {p.document.id: p.relevant for p in pairs}
    judge = graded_judge(ranking_judge(labels))
    mode = (
        ["--compare"]
        if source == "built-in"
        else ["--pairs", _write_pairs(pairs, tmp_path / "p.jsonl")]
    )
    with ScriptedLLMServer(faults=judge) as server:
        assert 0 == main(_check(server, *mode, "--judges", "verbal,logprob,pointwise", "--json"))
        figures = json.loads(capsys.readouterr().out)
        assert "logprob" == figures["chosen"] or "pointwise" == figures["chosen"]
        for judged in figures["judges"]:
            kind = judged["profile"]["kind"]
            profile = JudgeProfile.read(profile_file, model="scripted", kind=kind)
            assert judged["profile"]["threshold"] == profile.threshold
            run = _run_f1(pairs, profile, server.base_url)
            assert run == pytest.approx(judged["held_out_f1"], abs=0.01), kind
        grading = [r for r in server.requests if "verdicts" in json.dumps(r.get("response_format"))]
    chosen = JudgeProfile.read(profile_file, model="scripted")
    assert chosen.kind == figures["chosen"]
    assert chosen.threshold is not None and abs(chosen.threshold - 0.5) > 0.02
    assert (
        "one-call" == JudgeProfile.read(profile_file, model="scripted", kind="logprob").call_shape
    )
    assert grading and all("next_query" in json.dumps(r["response_format"]) for r in grading)


def test_the_text_report_names_the_call_the_threshold_and_the_choice(profile_file, capsys):
    """Plain text: each judge's call shape and threshold at the one operating point (what a
    run keeps), the trivial rule, where the profiles went and which is chosen; progress lines
    on stderr as the judges finish their questions."""
    with ScriptedLLMServer(faults=graded_judge(ranking_judge(LABELS))) as server:
        assert 0 == main(_check(server, "--compare"))
    captured = capsys.readouterr()
    out = captured.out
    for name in ("verbal", "logprob", "pointwise", "offline", "keep all", "one-call"):
        assert name in out
    assert f"profiles: {profile_file} (chosen: " in out
    assert "PASS: use the " in out
    assert "larger model" not in out
    assert "judge-check: json judge: question 8 of 8" in captured.err
    assert "judge-check: pointwise judge: question 1 of 8" in captured.err


def test_a_failing_check_leaves_nothing_chosen(profile_file, capsys):
    """A check that chose a judge, then one against a model calling everything relevant (exit
    1): the file keeps the figures and no chosen entry; a run then reads no profile."""
    with ScriptedLLMServer(faults=graded_judge(ranking_judge(LABELS))) as server:
        assert 0 == main(_check(server, "--compare", "--judges", "logprob"))
    assert "logprob" == read_profiles(profile_file)["scripted"][1]
    with ScriptedLLMServer(reply=all_relevant_judge) as server:
        assert 1 == main(_check(server, "--compare", "--judges", "verbal,logprob"))
    captured = capsys.readouterr()
    assert "no judge may be chosen" in captured.err
    assert "larger model" not in captured.out + captured.err
    judges, chosen = read_profiles(profile_file)["scripted"]
    assert chosen is None
    assert judges["logprob"].measured is not None
    assert JudgeProfile.read(profile_file, model="scripted", required=False) is None


def test_a_judge_ranking_worse_than_chance_is_never_chosen(profile_file, capsys):
    """Probabilities that put irrelevant documents above relevant ones: AUC below 0.5, refused
    whatever its F1 on the held-out half."""
    inverted = ranking_judge(LABELS, relevant=(0.05, 0.4), irrelevant=(0.5, 0.95))
    with ScriptedLLMServer(faults=graded_judge(inverted)) as server:
        main(_check(server, "--compare", "--judges", "logprob", "--json"))
    (figures,) = json.loads(capsys.readouterr().out)["judges"]
    assert figures["auc"] < 0.5
    assert "worse than chance" in figures["refused"]
    assert read_profiles(profile_file)["scripted"][1] is None


def test_a_threshold_collapsed_to_an_end_is_never_chosen(profile_file, capsys):
    """A model sure of everything (0.99 and more on every true): the fit separates the pairs
    at 0.995, an end of (0, 1) that any other wording would cross: not chosen, exit 1."""
    sure = ranking_judge(LABELS, relevant=(0.999, 0.9999), irrelevant=(0.99, 0.991))
    with ScriptedLLMServer(faults=graded_judge(sure)) as server:
        assert 1 == main(_check(server, "--compare", "--judges", "logprob", "--json"))
    (figures,) = json.loads(capsys.readouterr().out)["judges"]
    assert figures["profile"]["threshold"] > 0.99
    assert "collapsed" in figures["refused"]
    assert read_profiles(profile_file)["scripted"][1] is None


def test_a_server_sending_no_probabilities_leaves_the_threshold_judges_at_their_words(
    profile_file, capsys
):
    """No logprobs at all: nothing to fit (0.5 kept), no verdict read by probability; the
    logprob judge then keeps what the verbal one keeps."""
    with ScriptedLLMServer(reply=all_relevant_judge) as server:
        main(_check(server, "--compare", "--judges", "verbal,logprob", "--json"))
    verbal, scored = json.loads(capsys.readouterr().out)["judges"]
    assert [0.0, 0.0] == [verbal["scored_by_probability"], scored["scored_by_probability"]]
    assert 0.5 == scored["profile"]["threshold"]
    assert verbal["held_out_f1"] == scored["held_out_f1"]


def test_offline_judges_alone_need_no_llm(tmp_path, capsys, monkeypatch):
    """--judges offline compares without --llm-url or --model, and files its profile under
    the model "offline" (what an offline run reads)."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    path = tmp_path / "p.json"
    pairs = _write_pairs(_user_pairs(), tmp_path / "pairs.jsonl")
    code = main(
        ["judge-check", "--pairs", pairs, "--judges", "offline", "--calibration", str(path)]
    )
    assert code in (0, 1)
    assert "offline (no LLM)" in capsys.readouterr().out
    assert "offline" in read_profiles(path)


def test_pairs_lines_carry_title_and_id_as_documents_do(tmp_path):
    """A title goes in front of the text and into the metadata (the offline judge reads it);
    ids default to the line number; 1/0 are labels; an id twice for one question is refused."""
    path = tmp_path / "p.jsonl"
    path.write_text(
        '{"question": "q", "text": "a", "relevant": 1}\n\n'
        '{"question": "q", "text": "b", "relevant": false, "id": "x", "title": "Io"}\n',
        encoding="utf-8",
    )
    first, second = read_pairs(str(path))
    assert ("pair-1", True, "a", {}) == (
        first.document.id,
        first.relevant,
        first.document.text,
        dict(first.document.metadata),
    )
    assert ("x", False, "Io\nb", {"title": "Io"}) == (
        second.document.id,
        second.relevant,
        second.document.text,
        dict(second.document.metadata),
    )
    path.write_text('{"question": "q", "text": "a", "relevant": 1, "id": "x"}\n' * 2)
    with pytest.raises(ConfigError, match="repeats"):
        read_pairs(str(path))


@pytest.mark.parametrize(
    "make",
    ["device", "fifo", "long line", "not utf-8", "deep", "no label", "not an object", "empty"],
)
def test_a_hostile_pairs_file_is_one_line_naming_it(make, tmp_path, capsys):
    """/dev/zero, a FIFO, a 200 MB line, invalid UTF-8, deep nesting, a line without a label,
    a line that is no object, a file of blank lines: exit 2 and one error line naming the file,
    before any model is asked (no server is running here)."""
    path = tmp_path / "pairs.jsonl"
    if make == "device":
        path = "/dev/zero"
    elif make == "fifo":
        os.mkfifo(path)
    elif make == "long line":
        with open(path, "wb") as out:
            out.write(b'{"question": "q", "text": "')
            out.write(b"x" * (200 * 1024 * 1024))
            out.write(b'", "relevant": true}\n')
    elif make == "not utf-8":
        path.write_bytes(b'{"question": "q\xff", "text": "t", "relevant": true}\n')
    elif make == "deep":
        path.write_bytes(b"[" * 100_000 + b"\n")
    elif make == "no label":
        path.write_text('{"question": "q", "text": "t"}\n')
    elif make == "not an object":
        path.write_text("[1, 2]\n")
    else:
        path.write_text("\n\n")
    code = main(["judge-check", "--pairs", str(path), "--judges", "offline"])
    err = capsys.readouterr().err
    assert 2 == code
    assert 1 == len(err.strip().splitlines())
    assert str(path) in err


def test_every_mode_keeps_the_deadline_and_says_why_and_keeps_what_it_measured(
    profile_file, capsys
):
    """A server answering slowly past a short --deadline: --compare stops, prints the figures of
    what was graded, writes them marked partial with nothing chosen, and says why in one line."""
    with ScriptedLLMServer(faults=graded_judge(ranking_judge(LABELS)), latency=0.4) as server:
        code = main(
            _check(
                server, "--compare", "--judges", "logprob,pointwise", "--deadline", "1.5", "--json"
            )
        )
    captured = capsys.readouterr()
    assert 1 == code
    figures = json.loads(captured.out)
    assert figures["stopped"].startswith("the deadline of 1.5 s passed")
    assert figures["chosen"] is None
    assert "stopped early" in captured.err and 1 == len(captured.err.strip().splitlines()[-1:])
    judges, chosen = read_profiles(profile_file)["scripted"]
    assert chosen is None
    assert all(p.measured is not None and p.measured.partial for p in judges.values())


def test_ctrl_c_keeps_what_was_measured():
    """Cancelled after the first question (Ctrl-C sets the event): the comparison returns the
    figures so far, stopped "interrupted", nothing chosen, every profile marked partial."""
    stop = threading.Event()

    def progress(name: str, asked: int, questions: int, seconds: float) -> None:
        stop.set()

    with ScriptedLLMServer(faults=graded_judge(ranking_judge(LABELS))) as server:
        chat = OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))
        comparison = compare_judges(
            ["verbal", "logprob"],
            CHECK_PAIRS,
            model="scripted",
            chat=chat,
            policy=get_policy("general"),
            cancel=stop,
            progress=progress,
        )
        asked = server.request_count
    assert 1 == asked
    assert "interrupted" == comparison.stopped
    assert comparison.chosen is None
    assert all(p.measured.partial for p in comparison.profiles.values())


def test_no_more_requests_at_once_than_the_concurrency_given(profile_file, capsys):
    """--concurrency 1: the server never serves two requests at once (the pointwise judge asks
    one call per document); the default sends several."""
    peaks = []
    for more in (["--concurrency", "1"], []):
        with ScriptedLLMServer(faults=graded_judge(ranking_judge(LABELS)), latency=0.05) as server:
            main(_check(server, "--compare", "--judges", "pointwise", *more))
            peaks.append(server.max_in_flight)
    capsys.readouterr()
    assert 1 == peaks[0]
    assert peaks[1] > 1


def test_a_folder_that_cannot_be_written_loses_no_figure(tmp_path, capsys):
    """The profile's folder is a file: the figures are printed first, then one error line."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with ScriptedLLMServer(faults=graded_judge(ranking_judge(LABELS))) as server:
        code = main(
            _check(
                server, "--compare", "--judges", "logprob", "--calibration", str(blocker / "p.json")
            )
        )
    captured = capsys.readouterr()
    assert 2 == code
    assert "PASS: use the logprob" in captured.out
    assert "cannot write the judge profile" in captured.err


def test_unknown_judges_are_refused(capsys):
    """--judges with an unknown name: exit 2, one line."""
    with ScriptedLLMServer() as server:
        assert 2 == main(_check(server, "--compare", "--judges", "oracle"))
        assert "--judges" in capsys.readouterr().err


def test_split_keeps_each_question_on_one_side():
    """The fit and held-out halves share no question, and together hold every pair once."""
    fit, held = split_pairs(CHECK_PAIRS)
    assert sorted(fit + held) == list(range(len(CHECK_PAIRS)))
    assert not {CHECK_PAIRS[i].question for i in fit} & {CHECK_PAIRS[i].question for i in held}


def test_a_confident_verbal_judge_is_measured_by_its_words(profile_file, capsys):
    """Graded verdicts with 0.99 on each true/false (the confident model): the verbal judge's
    figures are those of its words (it keeps the high ones only), whatever the probabilities."""
    graded = {
        d: Written(True, 0.9, 0.9, 0.99) if y else Written(False, 0.1, 0.9, 0.01)
        for d, y in LABELS.items()
    }
    with ScriptedLLMServer(faults=graded_judge(lambda q, d: graded[d])) as server:
        main(_check(server, "--compare", "--judges", "verbal", "--json"))
    (figures,) = json.loads(capsys.readouterr().out)["judges"]
    assert 1.0 == figures["held_out_f1"]
    assert 1.0 == figures["scored_by_probability"]


@pytest.mark.timeout(300)
def test_ctrl_c_prints_and_writes_what_was_measured(tmp_path):
    """The real command, interrupted while its second question is held: it prints the figures
    of what was graded, writes them marked partial with nothing chosen, and exits 130."""
    import signal
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    answered = graded_judge(ranking_judge(LABELS))
    lock = threading.Lock()
    seen = []

    def choose(request, n):
        with lock:
            seen.append(1)
            first = len(seen) == 1
        return answered(request, n) if first else Fault.held()

    path = tmp_path / "profile.json"
    env = {**os.environ, "PYTHONPATH": str(root)}
    with ScriptedLLMServer(faults=choose) as server:
        command = [
            sys.executable, "-m", "corrective_rag", "judge-check", "--llm-url", server.base_url,
            "--model", "scripted", "--compare", "--judges", "logprob", "--calibration", str(path),
        ]  # fmt: skip
        proc = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            assert server.wait_for_requests(2, timeout=240)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=120)
        finally:
            server.release()
            if proc.poll() is None:
                proc.kill()
    assert 130 == proc.returncode, err
    assert "logprob" in out and "FAIL: stopped early (interrupted)" in out
    judges, chosen = read_profiles(path)["scripted"]
    assert chosen is None
    assert judges["logprob"].measured.partial
