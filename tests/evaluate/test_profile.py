"""A judge is one declared thing: the profile, its checks, its file (issue 46 item 1, issue 48
items 3, 4 and 8).

Mutation testing (mutmut on evaluate/profile.py, profile_file.py and kinds.py with this file):
equivalent survivors, named so that a later run can tell them from new ones:

- ``_MOST_BYTES`` changed by a little: any bound far above a real profile file holds.
- the log event's name and fields in ``write_profiles``.
- ``sort_keys``/``indent`` of the JSON written: the file reads back the same; ``allow_nan``:
  every figure is checked finite before it is written; the encoding: ``json.dumps`` writes
  ASCII.
- the temporary file's ``prefix``: a name nobody reads; ``missing_ok`` of its removal after a
  failed write: it exists there.
- ``os.path.realpath`` taken of a path that is no link: the same file.
- ``continue`` as ``break`` after the last measured figure (``auc``): nothing follows it.
"""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate import JudgeProfile
from corrective_rag.evaluate.learned import LearnedEvaluator, read_learned_judge
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.local import LocalEvaluator
from corrective_rag.evaluate.pointwise import PointwiseEvaluator
from corrective_rag.evaluate.profile import Measured, read_profiles, write_profiles
from corrective_rag.llm import prompts
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.models.onnx_embedder import OnnxEmbedder
from corrective_rag.types import Document

MEASURED = Measured(
    pairs=27,
    source="built-in",
    held_out_pairs=14,
    held_out_f1=0.8,
    auc=0.9,
    trivial_f1=0.53,
    date="2026-01-01T00:00:00+00:00",
    version="0.1.0",
)


def chat(model: str = "m") -> OpenAIChatClient:
    return OpenAIChatClient("http://127.0.0.1:9/v1", model)


def logprob(threshold: float = 0.62, model: str = "m") -> JudgeProfile:
    return JudgeProfile.of("logprob", model=model, threshold=threshold)


def test_each_kind_builds_its_judge_as_declared():
    """verbal: the written verdicts, proposing in the one-call shape; logprob: scored by P at
    the profile's threshold; pointwise: the yes/no judge at it; offline: the local judge."""
    verbal = JudgeProfile.of("verbal", model="m").evaluator(chat=chat())
    assert isinstance(verbal, LLMEvaluator)
    assert (True, "verbal", 5) == (verbal.propose, verbal.score_by, verbal.logprobs)
    scored = logprob().evaluator(chat=chat())
    assert isinstance(scored, LLMEvaluator)
    assert ("probability", 0.62) == (scored.score_by, scored.threshold)
    two = JudgeProfile.of("verbal", model="m", call_mode="two-call")
    assert "two-call" == two.call_shape
    assert two.evaluator(chat=chat(), call_mode="two-call").propose is False
    yes_no = JudgeProfile.of("pointwise", model="m", threshold=0.3).evaluator(chat=chat())
    assert isinstance(yes_no, PointwiseEvaluator) and 0.3 == yes_no.threshold
    assert isinstance(JudgeProfile.of("offline", model="m").evaluator(), LocalEvaluator)
    assert 0.5 == JudgeProfile.of("pointwise", model="m").threshold
    assert JudgeProfile.of("verbal", model="m", threshold=0.9).threshold is None


def test_the_options_a_run_gives_reach_the_judge_built():
    """A run's options (workers, context, the offline judge's weights) and its store reach the
    evaluator the profile builds; an explicit propose wins over the call shape."""
    from dataclasses import replace

    from corrective_rag.evaluate.local import DEFAULT_WEIGHTS
    from corrective_rag.models.tokens import TiktokenCounter

    counter = TiktokenCounter()
    verbal = JudgeProfile.of("verbal", model="m").evaluator(
        chat=chat(), max_workers=3, context_tokens=4096, propose=False
    )
    assert (3, 4096, False) == (verbal.max_workers, verbal.context_tokens, verbal.propose)
    yes_no = JudgeProfile.of("pointwise", model="m", threshold=0.4).evaluator(
        chat=chat(), max_workers=2, max_doc_tokens=50, token_counter=counter, context_tokens=9
    )
    assert (2, 50, 0.4) == (yes_no.max_workers, yes_no.max_doc_tokens, yes_no.threshold)
    assert counter is yes_no.counter

    class Embedder:
        def embed(self, texts: list[str]) -> list[list[float]]:
            return [[1.0] for _ in texts]

    class Store:
        embedder = Embedder()

        @staticmethod
        def idf(term: str) -> float:
            return 1.0

    capped = replace(DEFAULT_WEIGHTS, cap=2)
    local = JudgeProfile.of("offline", model="m").evaluator(
        store=Store(), weights=capped, max_sentences=7, link_titles=False, max_workers=9
    )
    assert isinstance(local, LocalEvaluator)
    assert (Store.embedder, Store.idf, capped) == (local.embedder, local.idf, local.weights)
    assert (7, False) == (local.max_sentences, local.link_titles)


def test_a_profile_for_another_model_prompt_or_call_shape_is_refused_with_which():
    """One line naming what differs: the model, the prompt version, or the call shape."""
    profile = logprob()
    with pytest.raises(ConfigError, match=r"measured for model 'm', not 'other'"):
        profile.evaluator(chat=chat("other"))
    old = JudgeProfile("logprob", "m", "crag-prompts/1", "one-call", 0.6)
    with pytest.raises(
        ConfigError,
        match=rf"prompt crag-prompts/1; this version sends "
        rf"{prompts.PROMPT_VERSION}",
    ):
        old.evaluator(chat=chat())
    with pytest.raises(
        ConfigError,
        match=r"measured in the one-call call; this loop makes the "
        r"two-call call",
    ):
        profile.evaluator(chat=chat(), call_mode="two-call")
    with pytest.raises(ConfigError, match="needs a chat model"):
        profile.evaluator()
    profile.check(model="m", call_mode="one-call")  # fits: no error
    JudgeProfile.of("offline", model="m").check(model="anything")  # no model to differ


def test_the_learned_kind_builds_the_learned_judge_at_its_fitted_threshold():
    """A learned profile that names no threshold decides at the shipped judge's fitted one."""
    profile = JudgeProfile.of("learned", model="offline")
    assert read_learned_judge().threshold == profile.threshold
    judge = profile.evaluator()
    assert isinstance(judge, LearnedEvaluator)
    assert profile.threshold == judge.threshold
    assert 0.7 == JudgeProfile.of("learned", model="offline", threshold=0.7).evaluator().threshold
    assert isinstance(judge.embedder, OnnxEmbedder) and judge.idf is None  # a default store's


def test_the_learned_and_offline_kinds_read_with_the_runs_store():
    """Given the run's store, the offline judges embed with its embedder and weigh the
    question's terms by its idf."""
    from corrective_rag.store.hybrid import HybridStore
    from corrective_rag.testing.filter_contract import LetterEmbedder

    embedder = LetterEmbedder()
    with HybridStore.in_memory(embedder=embedder) as store:
        moons = [
            "Ganymede is the largest moon.",
            "Titan is the haziest moon.",
            "Io is the hottest.",
        ]
        store.add(
            [Document(f"m{n}", text) for n, text in enumerate([*moons, "The sea.", "The sky."])]
        )
        for kind in ("learned", "offline"):
            judge = JudgeProfile.of(kind, model="offline").evaluator(store=store)
            assert judge.embedder is embedder, kind
            assert judge.idf is not None and judge.idf("ganymede") > judge.idf("the"), kind


def test_the_learned_kind_reads_the_runs_stored_vectors():
    """Given the run's store, the learned judge embeds the question alone for documents the
    store holds as judged, and a document whose text changed since."""
    from corrective_rag.store.hybrid import HybridStore
    from corrective_rag.testing.filter_contract import LetterEmbedder

    class CountingLetters(LetterEmbedder):
        def __init__(self) -> None:
            self.asked: list[str] = []

        def embed(self, texts):
            self.asked += list(texts)
            return super().embed(texts)

    embedder = CountingLetters()
    docs = [Document("m0", "Ganymede is the largest moon."), Document("m1", "Titan is hazy.")]
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add(docs)
        judge = JudgeProfile.of("learned", model="offline").evaluator(store=store)
        embedder.asked.clear()
        judge.evaluate("Which moon is largest?", [docs[0], Document("m1", "Titan.")])
    assert ["Which moon is largest?", "Titan."] == embedder.asked


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"kind": "oracle"}, "unknown judge kind"),
        ({"call_shape": "three-call"}, "unknown call shape"),
        ({"threshold": None}, "takes a threshold"),
        ({"kind": "verbal", "threshold": 0.5}, "takes no threshold"),
        ({"threshold": 1.0}, "threshold must be in"),
        ({"threshold": True}, "threshold must be a number"),
        ({"model": 3}, "model must be a string"),
    ],
)
def test_a_malformed_profile_is_refused(fields, match):
    """Each field is checked where the profile is made (from a file or by hand)."""
    base = {
        "kind": "logprob",
        "model": "m",
        "prompt_version": "p",
        "call_shape": "one-call",
        "threshold": 0.5,
    }
    with pytest.raises(ConfigError, match=match):
        JudgeProfile(**{**base, **fields})


def test_written_profiles_read_back_with_the_choice(tmp_path):
    """Each kind's profile and the one chosen read back as written; other models' entries and
    the model's other kinds stay when one is rewritten; None clears the choice."""
    path = tmp_path / "profile.json"
    measured = dataclasses.replace(logprob(), measured=MEASURED)
    verbal = JudgeProfile.of("verbal", model="m")
    write_profiles(path, "m", {"logprob": measured, "verbal": verbal}, "logprob")
    write_profiles(path, "n", {"verbal": JudgeProfile.of("verbal", model="n")}, "verbal")
    assert measured == JudgeProfile.read(path, model="m")
    assert verbal == JudgeProfile.read(path, model="m", kind="verbal")
    write_profiles(path, "m", {"verbal": verbal}, None)  # a check that chose nothing
    models = read_profiles(path)
    assert ({"logprob", "verbal"}, None) == (set(models["m"][0]), models["m"][1])
    assert "verbal" == models["n"][1]
    assert JudgeProfile.read(path, model="m", required=False) is None
    with pytest.raises(ConfigError, match="chose no judge for model 'm'"):
        JudgeProfile.read(path, model="m")


@pytest.mark.parametrize("edge", [0.0, 1.0])
def test_measured_figures_at_their_ends_read_back(tmp_path, edge):
    """A count of 0 and a share of exactly 0 or 1 are figures, not damage: they read back."""
    path = tmp_path / "profile.json"
    at_end = dataclasses.replace(
        MEASURED, held_out_pairs=0, held_out_f1=edge, trivial_f1=edge, auc=edge
    )
    profile = dataclasses.replace(logprob(), measured=at_end)
    write_profiles(path, "m", {"logprob": profile}, "logprob")
    assert profile == JudgeProfile.read(path, model="m")


def test_a_named_file_must_hold_the_model_and_a_default_one_may_be_missing(tmp_path):
    """--calibration FILE without this model's entry: one line naming the file and the models it
    holds; the default location, absent or without the model: no profile."""
    path = tmp_path / "profile.json"
    assert JudgeProfile.read(path, model="m", required=False) is None
    with pytest.raises(ConfigError, match="no such file"):
        JudgeProfile.read(path, model="m")
    write_profiles(path, "n", {"verbal": JudgeProfile.of("verbal", model="n")}, "verbal")
    with pytest.raises(ConfigError, match=r"no judge profile for model 'm' \(it holds n\)"):
        JudgeProfile.read(path, model="m")
    assert JudgeProfile.read(path, model="m", required=False) is None
    with pytest.raises(ConfigError, match="no pointwise judge measured for model 'n'"):
        JudgeProfile.read(path, model="n", kind="pointwise")


def test_the_first_format_reads_as_no_profile(tmp_path):
    """A file the last round's judge-check wrote (thresholds only, another meaning of the score)
    holds no profile; the next judge-check replaces it."""
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"version": 1, "judges": {"m\tlogprob": {"threshold": 0.3}}}))
    assert {} == read_profiles(path)
    write_profiles(path, "m", {"verbal": JudgeProfile.of("verbal", model="m")}, "verbal")
    assert "verbal" == JudgeProfile.read(path, model="m").kind


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"\xff\xfe{}",
        b"[" * 500_000,
        json.dumps({"format": "something else"}).encode(),
        json.dumps({"format": "corrective-rag judge profiles", "version": 3}).encode(),
        json.dumps(
            {"format": "corrective-rag judge profiles", "version": 2, "models": {"m": {}}}
        ).encode(),
        json.dumps(
            {
                "format": "corrective-rag judge profiles",
                "version": 2,
                "models": {"m": {"chosen": "x", "judges": {}}},
            }
        ).encode(),
    ],
)
def test_a_file_that_is_no_profile_file_is_one_line_naming_it(tmp_path, content):
    """Junk, invalid UTF-8, deep nesting, another format or version, a malformed entry: one
    ConfigError naming the file, never a UnicodeDecodeError or RecursionError."""
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        JudgeProfile.read(path, model="m")
    assert str(path) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_device_and_a_fifo_are_refused_at_once(tmp_path):
    """/dev/zero is not read forever, a FIFO does not block: each is one line."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        with pytest.raises(ConfigError, match="not a regular file"):
            JudgeProfile.read(path, model="m")


def test_a_symlinked_file_is_written_through_and_stays_a_link(tmp_path):
    """Writing through a symlink keeps the link and updates its target."""
    target = tmp_path / "real.json"
    link = tmp_path / "link.json"
    write_profiles(target, "m", {"verbal": JudgeProfile.of("verbal", model="m")}, None)
    link.symlink_to(target)
    write_profiles(link, "m", {"logprob": logprob()}, "logprob")
    assert link.is_symlink()
    assert "logprob" == JudgeProfile.read(target, model="m").kind


def test_a_folder_that_cannot_be_written_is_one_line(tmp_path):
    """A read-only folder: one ConfigError naming the file; nothing half-written."""
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(ConfigError, match="cannot write the judge profile"):
            write_profiles(
                folder / "p.json", "m", {"verbal": JudgeProfile.of("verbal", model="m")}, None
            )
    finally:
        folder.chmod(0o700)
    assert [] == list(folder.iterdir())


def test_a_file_in_a_path_that_is_a_file_is_one_line(tmp_path):
    """The profile's folder is a file (root cannot write there either): one line."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="cannot write the judge profile"):
        write_profiles(
            blocker / "p.json", "m", {"verbal": JudgeProfile.of("verbal", model="m")}, None
        )


def test_write_refuses_profiles_that_are_not_the_models(tmp_path):
    """A profile filed under another kind or model, or a choice without a profile: refused."""
    path = tmp_path / "p.json"
    with pytest.raises(ConfigError, match="is not the verbal judge"):
        write_profiles(path, "m", {"verbal": logprob()}, None)
    with pytest.raises(ConfigError, match="is not the logprob judge of 'x'"):
        write_profiles(path, "x", {"logprob": logprob()}, None)
    with pytest.raises(ConfigError, match="has no profile"):
        write_profiles(path, "m", {"logprob": logprob()}, "verbal")
    assert not path.exists()


def test_description_names_kind_call_and_threshold():
    """The one line judge-check prints for what it graded."""
    assert "logprob, one-call, threshold 0.620" == logprob().description
    assert "verbal, one-call" == JudgeProfile.of("verbal", model="m").description
    assert "pointwise, threshold 0.500" == JudgeProfile.of("pointwise", model="m").description
    assert "offline" == JudgeProfile.of("offline", model="m").description


def test_the_model_checked_is_the_one_given_else_the_chat_models():
    """An explicit model wins over the chat model's; a chat model with no name (or an empty
    one) is not checked; the offline judge has no model to differ."""

    class Nameless:
        def complete(self, messages, **kw):  # pragma: no cover - never called here
            raise AssertionError

    class Empty(Nameless):
        model = ""

    profile = logprob(model="m")
    with pytest.raises(ConfigError, match="not 'other'"):
        profile.evaluator(chat=chat("m"), model="other")
    profile.evaluator(chat=chat("other"), model="m")  # the given name is what is checked
    assert isinstance(profile.evaluator(chat=Nameless()), LLMEvaluator)
    assert isinstance(profile.evaluator(chat=Empty()), LLMEvaluator)


def _file_with(tmp_path, entry: dict) -> str:
    body = {
        "format": "corrective-rag judge profiles",
        "version": 2,
        "models": {"m": {"chosen": None, "judges": {"logprob": entry}}},
    }
    path = tmp_path / "p.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    return str(path)


GOOD = {
    "kind": "logprob",
    "model": "m",
    "prompt_version": prompts.PROMPT_VERSION,
    "call_shape": "one-call",
    "threshold": 0.6,
    "policy": "general",
    "measured": dataclasses.asdict(MEASURED),
}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"measured": []}, "'measured' must be an object"),
        ({"measured": {"pairs": 3}}, "'measured' lacks a field"),
        ({"measured": {**GOOD["measured"], "pairs": -1}}, "measured pairs must be a count"),
        ({"measured": {**GOOD["measured"], "pairs": True}}, "measured pairs must be a count"),
        ({"measured": {**GOOD["measured"], "pairs": 2.0}}, "measured pairs must be a count"),
        (
            {"measured": {**GOOD["measured"], "held_out_pairs": "7"}},
            "measured held_out_pairs must be a count",
        ),
        (
            {"measured": {**GOOD["measured"], "held_out_f1": 1.5}},
            "measured held_out_f1 must be a number in 0..1",
        ),
        (
            {"measured": {**GOOD["measured"], "trivial_f1": None}},
            "measured trivial_f1 must be a number in 0..1",
        ),
        (
            {"measured": {**GOOD["measured"], "auc": -0.1}},
            "measured auc must be a number in 0..1",
        ),
        ({"measured": {**GOOD["measured"], "auc": True}}, "measured auc must be a number in 0..1"),
        ({"measured": {**GOOD["measured"], "source": 3}}, "measured source must be a string"),
        ({"measured": {**GOOD["measured"], "date": None}}, "measured date must be a string"),
        ({"measured": {**GOOD["measured"], "version": 1}}, "measured version must be a string"),
        (
            {"measured": {**GOOD["measured"], "partial": 1}},
            "measured partial must be true or false",
        ),
        ({"model": "n"}, "the entry names another kind or model"),
        ({"kind": "pointwise"}, "the entry names another kind or model"),
        ({"call_shape": None}, "unknown call shape"),
        ({"threshold": None}, "takes a threshold"),
        ({"prompt_version": 5}, "prompt_version must be a string"),
    ],
)
def test_a_malformed_entry_is_one_line_naming_the_file_and_the_field(tmp_path, change, says):
    """Each field of an entry is checked as it is read; the error names the file, the model,
    the judge and what is wrong."""
    path = _file_with(tmp_path, {**GOOD, **change})
    with pytest.raises(ConfigError) as caught:
        JudgeProfile.read(path, model="m", kind="logprob")
    message = str(caught.value)
    assert says in message
    assert message.startswith(f"{path}: model 'm'")


def test_an_entry_that_is_no_object_and_a_measured_auc_of_none_read(tmp_path):
    """A judge entry must be an object; a measured AUC may be None (one class held out)."""
    path = _file_with(tmp_path, [])
    with pytest.raises(ConfigError, match="a judge profile must be an object"):
        JudgeProfile.read(path, model="m", kind="logprob")
    path = _file_with(tmp_path, {**GOOD, "measured": {**GOOD["measured"], "auc": None}})
    assert JudgeProfile.read(path, model="m", kind="logprob").measured.auc is None


def test_the_file_format_is_checked_and_said_exactly(tmp_path):
    """A JSON list, an object with `judges` but no version, a wrong version, `models` that is
    no object: one line each, saying what it found."""
    path = tmp_path / "p.json"
    for content, says in (
        ([1], "not a judge profile file (judge-check writes them)"),
        ({"judges": {}}, "not a judge profile file"),
        (
            {"format": "corrective-rag judge profiles", "version": 3},
            "judge profile version 3, not 2",
        ),
        (
            {"format": "corrective-rag judge profiles", "version": 2, "models": []},
            "'models' must be an object",
        ),
    ):
        path.write_text(json.dumps(content), encoding="utf-8")
        with pytest.raises(ConfigError) as caught:
            read_profiles(path)
        assert f"{path}: {says}" == str(caught.value)[: len(f"{path}: {says}")], content


def test_refusals_name_what_there_is(tmp_path):
    """An unknown kind or call mode lists the ones there are; a file without the model lists at
    most five models it holds (or says it holds none); nothing chosen says how to name one."""
    kinds = "verbal, logprob, pointwise, offline, learned"
    with pytest.raises(ConfigError, match=rf"^unknown judge kind 'oracle'; choose one of {kinds}$"):
        JudgeProfile.of("oracle", model="m")
    with pytest.raises(ConfigError, match=rf"^unknown judge kind 'oracle'; choose one of {kinds}$"):
        JudgeProfile("oracle", "m", "p", "one-call")
    with pytest.raises(ConfigError, match=r"^unknown judge kind"):
        JudgeProfile(["oracle"], "m", "p", "one-call")  # type: ignore[arg-type]
    shapes = "one-call, two-call, pointwise, offline"
    with pytest.raises(ConfigError, match=rf"^unknown call shape 'x'; one of {shapes}$"):
        JudgeProfile("verbal", "m", "p", "x")
    with pytest.raises(ConfigError, match=r"^call_mode must be 'one-call' or 'two-call', got 'x'$"):
        JudgeProfile.of("verbal", model="m", call_mode="x")
    path = tmp_path / "p.json"
    path.write_text(
        json.dumps({"format": "corrective-rag judge profiles", "version": 2, "models": {}})
    )
    with pytest.raises(ConfigError, match=r"\(it holds no model\)"):
        JudgeProfile.read(path, model="m")
    for n in range(6):
        write_profiles(path, f"m{n}", {"verbal": JudgeProfile.of("verbal", model=f"m{n}")}, None)
    with pytest.raises(ConfigError, match=r"\(it holds m0, m1, m2, m3, m4\): run judge-check"):
        JudgeProfile.read(path, model="m")
    with pytest.raises(
        ConfigError, match=r"its last check failed or was stopped\): name one with --judge KIND$"
    ):
        JudgeProfile.read(path, model="m0")


def test_the_policy_measured_under_is_kept():
    """JudgeProfile.of records the policy (general by default)."""
    assert "general" == JudgeProfile.of("verbal", model="m").policy
    assert "medical" == JudgeProfile.of("verbal", model="m", policy="medical").policy


def test_writing_makes_missing_folders_says_why_it_failed_and_logs_it(tmp_path, monkeypatch):
    """Missing folders are made; the temporary file is made beside the target (not in the
    system's temp folder); a failed rename leaves no temporary file and says why; a write is
    logged with where, which model and what was chosen."""
    import tempfile

    import structlog

    verbal = {"verbal": JudgeProfile.of("verbal", model="m")}
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "nowhere"))
    deep = tmp_path / "a" / "b" / "p.json"
    with structlog.testing.capture_logs() as logs:
        assert str(deep) == write_profiles(deep, "m", verbal, "verbal")
    assert [{"event": "judge_profile_written", "path": str(deep), "model": "m",
             "chosen": "verbal", "log_level": "info"}] == logs  # fmt: skip

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(ConfigError, match=r": No space left on device$"):
        write_profiles(deep, "m", verbal, None)
    assert ["p.json"] == sorted(p.name for p in deep.parent.iterdir())
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match=r": File exists$"):
        write_profiles(blocker / "p.json", "m", verbal, None)
