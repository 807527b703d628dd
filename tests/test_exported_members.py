import subprocess
import sys

import corrective_rag
import corrective_rag.testing


def test_all_is_sorted_and_complete():
    """__all__ is sorted and names every public attribute the package exports."""
    for module in (corrective_rag, corrective_rag.testing):
        exported = list(module.__all__)
        assert sorted(exported) == exported
        for name in exported:
            assert hasattr(module, name), name
        public = {n for n in vars(module) if not n.startswith("_") and n[0].isupper()}
        assert set() == public - set(exported)


def test_import_touches_no_model_and_no_heavy_library():
    """Importing the package loads neither torch, chromadb, sentence-transformers nor tiktoken."""
    code = (
        "import sys, corrective_rag; "
        "print(sorted(m for m in ('torch', 'chromadb', 'sentence_transformers', 'tiktoken', "
        "'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "[]" == out.stdout.strip()
