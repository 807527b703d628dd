from corrective_rag.rewrite.guard import check_rewrite


def test_accepts_a_supplemented_query():
    """A rewrite that keeps a question term and adds new ones passes."""
    assert None is check_rewrite(
        "Kiss and Tell 1945 film actress", "Who starred in Kiss and Tell?", []
    )


def test_rejects_repeats_of_tried_queries():
    """The same query in other case/spacing, or with the same content terms, is a repeat."""
    tried = ["kiss and tell actress"]
    assert "repeats" in check_rewrite("Kiss  and TELL actress", "who starred", tried)
    assert "repeats" in check_rewrite("actress kiss tell", "who starred", tried)


def test_rejects_drift_from_the_question():
    """A rewrite sharing no content term with the original question has drifted."""
    reason = check_rewrite("chocolate cake recipe", "Who starred in Kiss and Tell?", [])
    assert reason is not None and "drift" in reason


def test_rejects_empty_and_huge():
    """Empty and absurdly long rewrites are refused."""
    assert "empty" in check_rewrite("  ", "q", [])
    assert "longer" in check_rewrite("kiss " * 1000, "kiss", [])
