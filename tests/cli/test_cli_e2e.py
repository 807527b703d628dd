import json

import pytest
import structlog

from corrective_rag.cli.main import main

DOCS = {
    "copying.txt": "The copy module: copy.deepcopy(x) builds a deep copy of a compound object, "
    "recursively copying nested lists and dicts so that changing the copy leaves the original "
    "alone. copy.copy(x) makes a shallow copy that shares nested objects.",
    "timing.txt": "The timeit module measures the execution time of small code snippets. "
    "timeit.timeit(stmt, number=1000) runs the statement many times and returns seconds.",
    "random.txt": "The secrets module generates cryptographically strong random numbers for "
    "passwords and tokens: secrets.token_urlsafe() returns a URL-safe text token.",
    "sorting.txt": "sorted(iterable, key=None, reverse=False) returns a new sorted list; "
    "list.sort() sorts in place. The bisect module keeps a list in sorted order.",
}


@pytest.fixture(autouse=True)
def _restore_logging():
    yield
    structlog.reset_defaults()


@pytest.mark.slow
def test_index_run_batch_and_history_end_to_end(tmp_path, capsys):
    """Index real files, run one question, batch two, and read the results back, all via main()."""
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for name, text in DOCS.items():
        (corpus / name).write_text(text)
    store = str(tmp_path / "store")
    assert 0 == main(["index", str(corpus), "--store", store, "--no-progress"])
    assert "indexed" in capsys.readouterr().out
    assert 0 == main(["run", "how do I deep copy a nested list?", "--store", store, "--json"])
    result = json.loads(capsys.readouterr().out)
    assert result["history"] and result["stop_reason"]
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        '{"id": "c", "query": "deep copy of nested lists"}\n'
        '{"id": "t", "query": "time a small code snippet"}\n'
    )
    out = tmp_path / "r.jsonl"
    code = main(
        [
            "batch",
            str(queries),
            "--out",
            str(out),
            "--store",
            store,
            "--no-progress",
            "--concurrency",
            "2",
            "--min-relevant",
            "1",
        ]
    )
    assert 0 == code, capsys.readouterr().err
    assert "queries      2  ok 2" in capsys.readouterr().out
    assert 0 == main(["history", "show", str(out), "c"])
    assert "question: deep copy of nested lists" in capsys.readouterr().out
