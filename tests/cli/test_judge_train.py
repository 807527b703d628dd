"""``judge-check --pairs FILE --train``: the learned judge fine-tuned on the fit half of a
user's pairs, measured before and after on the held-out half, kept only when it does better,
and run as measured: the profile names its file (beside the profile file) and that file's hash
(issue 47, "judge-check ... --train").

Mutation testing (mutmut on evaluate/check/train.py and evaluate/learned_fit.py with this file
and tests/evaluate/test_learned_fit.py): equivalent survivors, named so that a later run can tell
them from new ones: the defaults ``call_mode`` (the learned judge's call shape is "offline" in
every mode, so ``call_mode=None`` too) and ``max_workers`` (no calls); ``<`` for ``<=`` in the
tie test (the ``1e-9`` makes an exact tie fall on the same side); the threshold and idf of the
evaluators that grade (the comparison decides every verdict again at the threshold it fits;
idf orders the terms the reasoning names); the strictness of the memory's zip (one vector per
text by the embedder contract); the record's wording past what test_training_puts_right...
reads. On evaluate/kinds.py and evaluate/profile.py (with tests/evaluate/test_profile.py):
``cast(None, ...)`` (a no-op at run time); the learned builder reading the shipped file eagerly
when no file is named (the same judge); the message of a kind "not part of this version" (no
such kind exists); ``continue`` for ``break`` after the last field checked; the file's name in
messages this selection does not read (tests/cli/test_judge_compare.py reads them).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading

import pytest
from learned_pairs import Counting, sight_pairs

from corrective_rag import HybridStore
from corrective_rag.cli.main import main
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate import JudgeProfile, get_policy
from corrective_rag.evaluate.check.compare import split_pairs
from corrective_rag.evaluate.check.fit import auc, f1
from corrective_rag.evaluate.check.train import compare_trained
from corrective_rag.evaluate.learned import read_learned_judge
from corrective_rag.evaluate.policy import Decision, decide
from corrective_rag.evaluate.profile import read_profiles, write_profiles

TRAINED_KEYS = ("kind", "base_model", "trained_from", "trained_on", "settings", "held_out")


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
    assert training["why"] == "kept: its held-out F1 beats the shipped judge's"
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
    before, after = training["before"], training["after"]
    assert {k: written.record[k] for k in TRAINED_KEYS} == {
        "kind": "logistic",
        "base_model": read_learned_judge().record["base_model"],
        "trained_from": "the shipped learned judge",
        "trained_on": {"source": "p.jsonl", "pairs": training["fit_pairs"], "questions": 8},
        "settings": {"l2": 1.0},
        "held_out": {
            "pairs": figures["held_out_pairs"],
            "auc": {"before": before["auc"], "after": after["auc"]},
            "f1": {"before": before["held_out_f1"], "after": after["held_out_f1"]},
            "keep_all_f1": figures["trivial_f1"],
            "policy": "general",
        },
    }
    assert training["fit_pairs"] == 40 and training["fit_questions"] == 8
    assert figures["chosen"] == "learned"  # chosen again among all, the trained judge in place
    printed = figures["judges"][1]
    assert printed["profile"]["threshold"] == learned.threshold == written.threshold
    run_f1, run_auc = _held_out(pairs, learned.evaluator())
    assert run_f1 == pytest.approx(printed["held_out_f1"], abs=0.01)
    assert run_auc == pytest.approx(printed["auc"], abs=0.01)
    shipped_f1, _ = _held_out(pairs, JudgeProfile.of("learned", model="offline").evaluator())
    assert shipped_f1 < run_f1


def test_a_trained_judge_that_does_no_better_is_not_kept():
    """Started from a judge that ranks these pairs right (the cosine alone) and pulled onto its
    weights (a pull of 1e12; the bias stays free), the trained judge keeps what the start keeps:
    its held-out F1 ties the start's, and a tie is not kept."""
    start = dataclasses.replace(read_learned_judge(), weights=(1.0, 0.0, 0.0, 0.0, 0.0), bias=0.0)
    training = compare_trained(
        ["learned"],
        sight_pairs(),
        model="offline",
        policy=get_policy("general"),
        l2=1e12,
        start=start,
    )
    assert training.judge is not None and training.after is not None
    assert training.judge.weights == pytest.approx(start.weights, abs=1e-6)
    assert training.after.refused is None
    assert training.after.held_out_f1 == training.before.held_out_f1
    assert training.kept is False
    assert training.why == "not kept: its held-out F1 does not beat the shipped judge's"
    assert training.comparison.judges == (training.before,)


def test_a_trained_judge_that_may_not_be_chosen_is_not_kept():
    """Labels that no measure of these documents tells apart (the first and the last document
    of each question relevant): whatever training does, a judge no better than keeping every
    document is not kept, and the reason is the comparison's."""
    pairs = tuple(
        dataclasses.replace(p, relevant=p.document.id.endswith(("-0", "-4"))) for p in sight_pairs()
    )
    training = compare_trained(["learned"], pairs, model="offline", policy=get_policy("general"))
    assert training.after is not None and training.after.refused is not None
    assert training.kept is False
    assert training.why == f"not kept: {training.after.refused}"


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
        ([], "--train needs --pairs FILE: your own labelled pairs to train on"),
        (
            ["--pairs", "PAIRS", "--judges", "offline"],
            "--train fine-tunes the learned judge: add learned to --judges",
        ),
    ],
)
def test_train_says_what_it_needs(extra, match, tmp_path, capsys):
    pairs = _write(sight_pairs(), tmp_path / "p.jsonl")
    args = [a.replace("PAIRS", pairs) for a in extra]
    code = main(["judge-check", "--train", "--calibration", str(tmp_path / "p.json"), *args])
    assert code == 2
    assert f"error: {match}\n" in capsys.readouterr().err


def test_train_needs_two_questions(tmp_path):
    one = tuple(p for p in sight_pairs() if "Vienna" in p.question)
    with pytest.raises(ConfigError, match=r"^--train needs pairs of at least two questions \(it"):
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
    assert training.judge is None and training.after is None and training.kept is False
    assert training.comparison.stopped == "interrupted"
    assert training.comparison.chosen is None
    assert training.why == "not trained: the check interrupted"
    assert training.before is training.comparison.judges[1]
    assert (training.fit_pairs, training.fit_questions) == (40, 8)


def test_stopped_while_grading_the_trained_judge_keeps_nothing_and_chooses_nothing():
    """The one deadline (or Ctrl-C) covers grading the trained judge too: stopped there (the
    event set as the first grading's last question is told), the trained judge is not kept and
    no judge is chosen, though the shipped judges' figures stand."""
    cancel = threading.Event()
    questions = len({p.question for p in sight_pairs()})
    told = []

    def progress(name, asked, total, seconds):
        told.append((name, asked))
        if len(told) == 2 * questions:  # the first comparison's two gradings are done
            cancel.set()

    training = compare_trained(
        ["offline", "learned"],
        sight_pairs(),
        model="offline",
        policy=get_policy("general"),
        cancel=cancel,
        progress=progress,
    )
    assert training.judge is not None  # trained: the first comparison was complete
    assert training.kept is False
    assert training.why == "not kept: grading the trained judge interrupted"
    assert training.comparison.stopped == "interrupted"
    assert training.comparison.chosen is None  # the offline judge was chosen before the stop
    assert training.comparison.judges[1] == training.before
    assert training.after is not None and training.after.name == "learned"
    assert (training.fit_pairs, training.fit_questions) == (40, 8)
    assert len(told) == 2 * questions  # the trained judge graded no question


def test_the_fit_half_of_one_kind_trains_nothing():
    """Every pair relevant: nothing to tell apart, so nothing is trained, and it says why."""
    pairs = tuple(dataclasses.replace(p, relevant=True) for p in sight_pairs())
    training = compare_trained(["learned"], pairs, model="offline", policy=get_policy("general"))
    assert training.judge is None and training.kept is False
    assert training.why == "not trained: the fit half needs relevant and irrelevant pairs"


def test_the_deadline_covers_the_first_grading():
    """A deadline already spent stops the first grading: nothing is trained."""
    training = compare_trained(
        ["learned"], sight_pairs(), model="offline", policy=get_policy("general"), max_seconds=1e-9
    )
    assert training.judge is None
    assert training.comparison.stopped is not None and "deadline" in training.comparison.stopped


class _Clock:
    """The module's clock, read at the start and before the second grading: fixed readings."""

    def __init__(self, *readings: float) -> None:
        self.readings = iter(readings)

    def monotonic(self) -> float:
        return next(self.readings)


@pytest.mark.parametrize(
    ("spent", "why"),
    [
        (3600.0, "not kept: the deadline of 3600 s passed before it graded"),
        (10_000.0, "not kept: the deadline of 3600 s passed before it graded"),
        (
            3600.0 - 1e-9,
            "not kept: grading the trained judge the deadline of 3600 s passed while it graded",
        ),
    ],
)
def test_the_deadline_left_after_training_bounds_the_second_grading(monkeypatch, spent, why):
    """The second grading gets what is left of the one deadline, by the module's clock (read at
    the start and before the second grading; the first grading ran under the real clock with an
    hour to spare): none left, it does not grade; a nanosecond left, it grades under that and is
    stopped before its first question. Either way the trained judge is not kept and nothing is
    chosen, though the offline judge was chosen before."""
    from corrective_rag.evaluate.check import train

    monkeypatch.setattr(train, "time", _Clock(0.0, spent))
    training = compare_trained(
        ["offline", "learned"],
        sight_pairs(),
        model="offline",
        policy=get_policy("general"),
        max_seconds=3600,
    )
    assert training.judge is not None and training.kept is False
    assert training.why.startswith(why)
    assert training.comparison.stopped is not None
    assert training.comparison.chosen is None
    assert training.before is training.comparison.judges[1]
    assert (training.fit_pairs, training.fit_questions) == (40, 8)


def test_training_starts_from_the_judge_given(embedder):
    """``start``: the judge compared before and fine-tuned from (its standardisation kept),
    and the record says so."""
    start = dataclasses.replace(read_learned_judge(), weights=(1.0, 0.0, 0.0, 0.0, 0.0), bias=0.0)
    training = compare_trained(
        ["learned"], sight_pairs(), model="offline", policy=get_policy("general"), start=start
    )
    shipped = compare_trained(
        ["learned"], sight_pairs(), model="offline", policy=get_policy("general")
    )
    assert training.before.auc != shipped.before.auc  # the cosine alone ranks these right
    assert training.before.auc > 0.9
    assert training.judge is not None and training.judge.mean == start.mean
    assert training.judge.record["trained_from"] == "a given judge"


def test_with_a_store_each_text_is_embedded_once_and_stored_documents_not_at_all(
    embedder, monkeypatch
):
    """With a store (its embedder, idf and vectors, as a run builds the judge), grading,
    training and grading again embed each question once and no document the store holds as
    read: the three passes share the vectors."""
    counting = Counting(embedder)
    pairs = sight_pairs()

    def fallback(*args, **kwargs):
        raise AssertionError("a judge fell back to the default embedder, not the store's")

    monkeypatch.setattr("corrective_rag.models.embeddings.SentenceTransformerEmbedder", fallback)
    documents = list({p.document.id: p.document for p in pairs}.values())
    with HybridStore.in_memory(embedder=counting) as store:
        store.add(documents)
        embedder.clear_cache()
        counting.asked.clear()
        training = compare_trained(
            ["learned"], pairs, model="offline", policy=get_policy("general"), store=store
        )
    assert training.kept is True
    questions = list(dict.fromkeys(p.question for p in pairs))
    assert sorted(counting.asked[1:]) == sorted(questions)  # [0]: loading the model


def test_too_few_questions_to_train_on_train_nothing_and_say_how_many_are_needed(tmp_path, capsys):
    """Four questions (two to train on): the judges are compared, nothing is trained, and the
    line says how many questions --train needs."""
    few = [p for p in sight_pairs() if p.question in {q.question for q in sight_pairs()[:20]}]
    code = main(
        [
            "judge-check",
            "--pairs",
            _write(few, tmp_path / "p.jsonl"),
            "--train",
            "--calibration",
            str(tmp_path / "profile.json"),
        ]
    )
    out = capsys.readouterr().out
    assert code in (0, 1)
    assert (
        "trained: the learned judge on 10 pairs of 2 questions (the fit half); not trained: the "
        "fit half holds 2 of the questions, fewer than 5; give pairs of at least 10 questions"
    ) in out
    assert not list(tmp_path.glob("*.learned-*.json"))


def test_progress_names_the_trained_judges_grading():
    """The second grading is told as the trained judge's, so the two are told apart; pairs
    given without a source are recorded as the built-in ones are."""
    told = []
    training = compare_trained(
        ["learned"],
        sight_pairs(),
        model="offline",
        policy=get_policy("general"),
        progress=lambda name, asked, total, seconds: told.append((name, asked, total)),
    )
    questions = len({p.question for p in sight_pairs()})
    assert told[:1] == [("learned", 1, questions)]
    assert told == [("learned", i, questions) for i in range(1, questions + 1)] + [
        ("trained learned", i, questions) for i in range(1, questions + 1)
    ]
    assert training.comparison.judges[0].profile.measured.source == "built-in"


def test_a_trained_profile_built_with_a_store_runs_its_file_and_threshold(embedder, tmp_path):
    """As ``run --store`` builds it (the store's embedder, idf and vectors): the judge is the
    profile's file, decided at the profile's threshold, not the shipped weights."""
    trained = dataclasses.replace(
        read_learned_judge(), weights=(1.0, 0.0, 0.0, 0.0, 0.0), bias=0.25, threshold=0.61
    )
    text = json.dumps(trained.file_record())
    path = tmp_path / "profile.learned-0.json"
    path.write_text(text, encoding="utf-8")
    profile = dataclasses.replace(
        JudgeProfile.of("learned", model="offline", threshold=0.37),
        judge_file=str(path),
        judge_sha256=hashlib.sha256(text.encode()).hexdigest(),
    )
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add([p.document for p in sight_pairs()[:5]])
        judge = profile.evaluator(store=store)
        assert (judge.judge.weights, judge.judge.bias) == (trained.weights, trained.bias)
        assert judge.threshold == 0.37
        assert judge.stored is not None and judge.idf is not None
