from corrective_rag.text import content_terms, tokenize


def test_tokenize_lowercases_drops_stopwords_and_folds_plurals():
    """The documented tokenizer: lower-case words, no stop words, plural endings folded."""
    assert ["parser", "library", "box", "python3"] == tokenize(
        "The Parsers of the libraries, boxes and Python3!"
    )


def test_content_terms_keeps_numbers_and_unicode_words():
    """Numbers and non-ASCII words are content terms too."""
    assert {"1945", "café", "film"} == content_terms("a café film of 1945")
