"""``judge-check --pairs FILE --train``: the learned judge fine-tuned on the fit half of a
user's pairs, measured before and after on the held-out half, kept only when it does better,
and run as measured: the profile names its file (beside the profile file) and that file's hash
(issue 47, "judge-check ... --train")."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading

import pytest
from learned_pairs import sight_pairs

from corrective_rag.cli.main import main
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate import JudgeProfile, get_policy
from corrective_rag.evaluate.check.compare import split_pairs
from corrective_rag.evaluate.check.fit import auc, f1
from corrective_rag.evaluate.check.train import compare_trained
from corrective_rag.evaluate.learned import read_learned_judge
from corrective_rag.evaluate.policy import Decision, decide
from corrective_rag.evaluate.profile import read_profiles, write_profiles


@pytest.fixture(autouse=True)
def _no_llm(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _write(pairs, path) -> str:
    rows = []
    for p in pairs:
        title = p.document.metadata["title"]
        text = p.document.text.split("\n", 1)[1]
        rows.append(
            {
                "question": p.question,
                "id": p.document.id,
                "title": title,
                "text": text,
                "relevant": p.relevant,
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _held_out(pairs, evaluator) -> tuple[float, float | None]:
    """F1 of what ``evaluator`` keeps under the general policy, and the AUC of its
    probabilities, on the held-out questions: one evaluate call per question, as a run."""
    _, held = split_pairs(pairs)
    kept, labels, scores = [], [], []
    for question in dict.fromkeys(pairs[i].question for i in held):
        group = [p for p in pairs if p.question == question]
        verdicts = evaluator.evaluate(question, [p.document for p in group]).verdicts
        kept += [decide(v, get_policy("general")) is Decision.KEEP for v in verdicts]
        scores += [v.probability for v in verdicts]
        labels += [p.relevant for p in group]
    return f1(kept, labels), auc(scores, labels)


def test_training_puts_right_what_the_fit_half_shows_wrong_and_the_run_applies_it(tmp_path, capsys):
    """Offline, no --llm-url or --model: the shipped learned judge ranks these pairs upside down;
    trained on half the questions it ranks the other half right. judge-check prints both, keeps
    the trained judge, writes its file beside the profile file and names it there with its
    hash; a run's evaluator built from that profile keeps, on the held-out pairs, exactly the
    F1 printed (the same weights, the same threshold)."""
    pairs = sight_pairs()
    profile = tmp_path / "profile.json"
    code = main(
        [
            "judge-check",
            "--pairs",
            _write(pairs, tmp_path / "p.jsonl"),
            "--train",
            "--calibration",
            str(profile),
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    figures = json.loads(out)
    training = figures["training"]
    assert code == 0
    assert training["kept"] is True
    assert training["before"]["auc"] < 0.5 < 0.9 < training["after"]["auc"]
    assert training["after"]["held_out_f1"] > training["before"]["held_out_f1"]
    assert [j["profile"]["kind"] for j in figures["judges"]] == ["offline", "learned"]
    learned = JudgeProfile.read(profile, model="offline", kind="learned")
    assert learned.judge_file is not None and learned.judge_sha256 is not None
    assert os.path.dirname(learned.judge_file) == str(tmp_path)
    assert learned.judge_file in err  # said where it went
    raw = json.loads(profile.read_text())["models"]["offline"]["judges"]["learned"]
    assert raw["judge_file"] == os.path.basename(learned.judge_file)  # moves with the profile
    written = read_learned_judge(learned.judge_file, sha256=learned.judge_sha256)
    assert written.record["held_out"]["auc"]["after"] == training["after"]["auc"]
    assert written.record["trained_on"]["questions"] == 8
    printed = figures["judges"][1]
    assert printed["profile"]["threshold"] == learned.threshold == written.threshold
    run_f1, run_auc = _held_out(pairs, learned.evaluator())
    assert run_f1 == pytest.approx(printed["held_out_f1"], abs=0.01)
    assert run_auc == pytest.approx(printed["auc"], abs=0.01)
    shipped_f1, _ = _held_out(pairs, JudgeProfile.of("learned", model="offline").evaluator())
    assert shipped_f1 < run_f1


def test_a_trained_judge_that_does_no_better_is_not_kept(tmp_path):
    """Labels at random to the words: the trained judge cannot beat the shipped one on the
    held-out half, so the learned judge's figures stay the shipped judge's."""
    pairs = tuple(
        type(p)(p.question, p.document, p.document.id.endswith(("-0", "-4"))) for p in sight_pairs()
    )
    training = compare_trained(
        ["learned"], pairs, model="offline", policy=get_policy("general"), l2=1e6
    )
    assert training.judge is not None and training.after is not None
    assert not training.kept, training.why  # pulled onto the shipped weights: no better
    assert training.comparison.judges[0] == training.before
    assert "not kept" in training.why


def test_the_trained_judge_is_refused_when_its_file_changed(tmp_path):
    """A judge file edited after it was measured is refused when the judge is built, naming the
    file and what to do; so is a profile whose file is gone."""
    judge_file = tmp_path / "profile.learned-x.json"
    text = json.dumps(read_learned_judge().file_record())
    judge_file.write_text(text, encoding="utf-8")
    digest = hashlib.sha256(text.encode()).hexdigest()
    profile = JudgeProfile.of("learned", model="offline")
    named = dataclasses.replace(profile, judge_file=str(judge_file), judge_sha256=digest)
    assert named.evaluator().judge.weights == read_learned_judge().weights
    judge_file.write_text(text + "\n", encoding="utf-8")  # one byte more: another file
    with pytest.raises(ConfigError, match="changed since it was measured"):
        named.evaluator()
    judge_file.unlink()
    with pytest.raises(ConfigError, match=str(judge_file)):
        named.evaluator()


def test_a_profile_names_a_judge_file_only_for_a_trainable_kind_and_with_its_hash(tmp_path):
    learned = JudgeProfile.of("learned", model="offline")
    with pytest.raises(ConfigError, match="together"):
        dataclasses.replace(learned, judge_file="x.json")
    with pytest.raises(ConfigError, match="64 hex"):
        dataclasses.replace(learned, judge_file="x.json", judge_sha256="abc")
    with pytest.raises(ConfigError, match="takes no judge file"):
        dataclasses.replace(
            JudgeProfile.of("offline", model="offline"), judge_file="x.json", judge_sha256="0" * 64
        )
    # relative to the profile file's folder, read and written
    named = dataclasses.replace(learned, judge_file=str(tmp_path / "j.json"), judge_sha256="0" * 64)
    path = tmp_path / "sub" / "profile.json"
    path.parent.mkdir()
    link = tmp_path / "link.json"
    write_profiles(path, "offline", {"learned": named}, None)
    raw = json.loads(path.read_text())["models"]["offline"]["judges"]["learned"]
    assert raw["judge_file"] == str(tmp_path / "j.json")  # not beside it: kept whole
    moved = dataclasses.replace(named, judge_file=str(path.parent / "j.json"))
    write_profiles(path, "offline", {"learned": moved}, None)
    raw = json.loads(path.read_text())["models"]["offline"]["judges"]["learned"]
    assert raw["judge_file"] == "j.json"
    os.symlink(path, link)  # read through a link: beside the link's target
    assert read_profiles(link)["offline"][0]["learned"].judge_file == str(path.parent / "j.json")


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ([], "--train needs --pairs"),
        (["--pairs", "PAIRS", "--judges", "offline"], "add learned to --judges"),
    ],
)
def test_train_says_what_it_needs(extra, match, tmp_path, capsys):
    pairs = _write(sight_pairs(), tmp_path / "p.jsonl")
    args = [a.replace("PAIRS", pairs) for a in extra]
    code = main(["judge-check", "--train", "--calibration", str(tmp_path / "p.json"), *args])
    assert code == 2
    assert match in capsys.readouterr().err


def test_train_needs_two_questions(tmp_path):
    one = tuple(p for p in sight_pairs() if "Vienna" in p.question)
    with pytest.raises(ConfigError, match="at least two questions"):
        compare_trained(["learned"], one, model="offline", policy=get_policy("general"))


def test_ctrl_c_before_training_trains_nothing_and_chooses_nothing():
    """Stopped while the judges grade (Ctrl-C: the event set), nothing is trained, the figures
    so far are kept and marked, and no judge is chosen."""
    cancel = threading.Event()
    cancel.set()
    training = compare_trained(
        ["offline", "learned"],
        sight_pairs(),
        model="offline",
        policy=get_policy("general"),
        cancel=cancel,
    )
    assert training.judge is None and training.after is None and not training.kept
    assert training.comparison.stopped == "interrupted"
    assert training.comparison.chosen is None
    assert "not trained" in training.why


def test_stopped_while_grading_the_trained_judge_keeps_nothing_and_chooses_nothing():
    """The one deadline (or Ctrl-C) covers grading the trained judge too: stopped there (the
    event set as the first grading's last question is told), the trained judge is not kept and
    no judge is chosen, though the shipped judges' figures stand."""
    cancel = threading.Event()
    questions = len({p.question for p in sight_pairs()})
    told = []

    def progress(name, asked, total, seconds):
        told.append((name, asked))
        if len(told) == questions:  # the learned judge's grading is the first and only one
            cancel.set()

    training = compare_trained(
        ["learned"],
        sight_pairs(),
        model="offline",
        policy=get_policy("general"),
        cancel=cancel,
        progress=progress,
    )
    assert training.judge is not None  # trained: the first grading was complete
    assert not training.kept and "not kept" in training.why
    assert training.comparison.stopped == "interrupted"
    assert training.comparison.chosen is None
    assert training.comparison.judges == (training.before,)
    assert len(told) == questions  # the trained judge graded no question
