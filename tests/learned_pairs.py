"""Labelled pairs on which the shipped learned judge is wrong and a few pairs put it right.

Sixteen questions ("Which famous river is found near Vienna?"), each with two documents about
the sight asked for (holding every word of the question) and three that are not (the place's
food; another famous sight). The shipped judge, fitted on collections whose hard negatives hold
more of the question's words than their relevant documents, ranks these upside down (AUC 0 on
the held-out half); trained on the fit half it ranks them right.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from corrective_rag.evaluate.check.pairs import CheckPair
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.types import Document

TOPICS = (
    ("river", "Vienna", "Danube"),
    ("mountain", "Nepal", "Everest"),
    ("desert", "Chile", "Atacama"),
    ("lake", "Siberia", "Baikal"),
    ("volcano", "Sicily", "Etna"),
    ("island", "Denmark", "Greenland"),
    ("canal", "Egypt", "Suez"),
    ("waterfall", "Venezuela", "Angel"),
    ("glacier", "Alaska", "Hubbard"),
    ("forest", "Brazil", "Amazon"),
    ("reef", "Australia", "Barrier"),
    ("bridge", "Istanbul", "Bosphorus"),
    ("tower", "Paris", "Eiffel"),
    ("temple", "Cambodia", "Angkor"),
    ("palace", "Beijing", "Forbidden"),
    ("cathedral", "Cologne", "Dom"),
)


def sight_pairs() -> tuple[CheckPair, ...]:
    """Five titled pairs per question, two relevant."""
    out = []
    for i, (kind, place, name) in enumerate(TOPICS):
        question = f"Which famous {kind} is found near {place}?"
        other, third = TOPICS[(i + 5) % len(TOPICS)], TOPICS[(i + 9) % len(TOPICS)]
        docs = [
            (name, f"The {name} {kind} is the most famous {kind} found near {place}.", True),
            (
                f"{name} facts",
                f"Visitors to {place} come to see the {name} {kind}, found near the city.",
                True,
            ),
            (f"{place} food", f"{place} is known for its food and its music halls.", False),
            (other[2], f"The {other[2]} {other[0]} is a famous sight near {other[1]}.", False),
            (third[2], f"Tourists travel far to the {third[2]} {third[0]}.", False),
        ]
        for j, (title, text, relevant) in enumerate(docs):
            document = Document(f"d{i}-{j}", f"{title}\n{text}", {"title": title})
            out.append(CheckPair(question, document, relevant))
    return tuple(out)


class Counting:
    """The real embedder, counting the texts it is asked to embed."""

    def __init__(self, inner: SentenceTransformerEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.asked: list[str] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.asked += texts
        return self.inner.embed(texts)
