"""Plain-text helpers shared by BM25, the drift guard, the judges and the rewriters.

``tokens``: :func:`tokenize` and :func:`content_terms`, the one tokenizer every part compares
with (BM25 scores reproducible with ``rank_bm25`` over the same tokens); ``lexical``: sentences,
names and spans; ``display``: text shown on a terminal; ``screening``: injection screening;
``secrets``: masking keys on every way out; ``urls``: masking the credentials a URL carries.
"""

from corrective_rag.text.tokens import STOPWORDS, content_terms, tokenize

__all__ = ["STOPWORDS", "content_terms", "tokenize"]
