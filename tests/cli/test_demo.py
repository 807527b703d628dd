from corrective_rag.cli.demo import DEMO_QUESTIONS, STDLIB_MODULES, stdlib_documents


def test_stdlib_corpus_has_hundreds_of_chunks_holding_the_demo_answers():
    """The demo corpus is several hundred chunks with unique ids and holds each answer's object."""
    docs = stdlib_documents()
    ids = [d.id for d in docs]
    assert len(ids) == len(set(ids))
    assert 500 <= len(docs) <= 2000
    assert {"subprocess.run#0", "tempfile.mkstemp#0", "timeit.timeit#0"} <= set(ids)
    assert all(len(d.text.split()) <= 110 for d in docs)
    assert 3 == len(DEMO_QUESTIONS) and len(STDLIB_MODULES) >= 60


def test_unknown_modules_are_skipped():
    """A module missing on this platform is skipped rather than failing the demo."""
    docs = stdlib_documents(("no_such_module_xyz", "copy"))
    assert {"copy"} == {d.metadata["module"] for d in docs}
