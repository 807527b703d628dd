"""A sentence-transformers model as an ONNX file, exported locally and cached on disk.

The export reads only the model's own folder (``torch.onnx.export``, TorchScript exporter: no hub,
no ``optimum``), fuses what ONNX Runtime's transformer optimizer fuses, and for ``"int8"``
quantises the weights with ONNX Runtime's own dynamic quantiser, per output channel (per-tensor
int8 moves all-MiniLM-L6-v2's vectors to a cosine of ~0.95 with torch's; per channel keeps it
near 0.995). The file is cached under a name keyed by the model folder, its weights' size and
modification time, the precision and :data:`EXPORT_VERSION`, written to a temporary file and
renamed into place, so that a reader sees a whole file or none, and a cached file that cannot
be loaded is exported again over it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from corrective_rag.errors import ConfigError

__all__ = ["EXPORT_VERSION", "ONNX_PRECISIONS", "default_cache_dir", "export_key", "export_onnx"]

ONNX_PRECISIONS = ("int8", "float32")
# Bumped whenever the exported graph changes (inputs, opset, fusions, quantisation), so that a
# file cached by an older version is never read by a newer one.
EXPORT_VERSION = 1
_OPSET = 17  # the TorchScript exporter's well-trodden opset for BERT; ORT 1.16+ runs it
_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def default_cache_dir() -> Path:
    """``~/.cache/corrective_rag/onnx``: where exported models are kept unless told otherwise."""
    return Path.home() / ".cache" / "corrective_rag" / "onnx"


def export_key(name: str, folder: str, precision: str) -> str:
    """File name of model ``name``'s export (from ``folder``): changes when the weights change."""
    root = Path(folder).resolve()
    stamp: list[Any] = [str(root), precision, EXPORT_VERSION, _OPSET]
    for weights in _WEIGHTS:
        path = root / weights
        if path.is_file():
            info = path.stat()
            stamp.append([weights, info.st_size, info.st_mtime_ns])
    digest = hashlib.blake2b(json.dumps(stamp).encode(), digest_size=8).hexdigest()
    label = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[-64:] or "model"
    return f"{label}-{digest}-{precision}.onnx"


def export_onnx(model: Any, target: Path, precision: str) -> None:
    """Write ``model``'s transformer (a loaded ``SentenceTransformer``) to ``target``, atomically.

    The graph takes the tokenizer's ``input_ids``, ``attention_mask`` (and ``token_type_ids``
    where the model reads them) with any batch size and length, and returns the last hidden
    state; pooling and normalisation stay outside, in numpy.
    """
    if precision not in ONNX_PRECISIONS:
        raise ConfigError(f"precision must be one of {ONNX_PRECISIONS}, got {precision!r}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _export(model, target, precision)
    except OSError as exc:
        raise ConfigError(f"could not write the ONNX export to {target.parent}: {exc}") from exc


def _export(model: Any, target: Path, precision: str) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".export-") as work:
        plain = Path(work) / "plain.onnx"
        _trace(model[0].auto_model, plain)
        fused = Path(work) / "fused.onnx"
        _fuse(plain, fused, model[0].auto_model.config)
        final = fused
        if precision == "int8":
            final = Path(work) / "int8.onnx"
            _quantise(fused, final)
        # the work folder lies beside target (same file system): one atomic rename publishes it
        os.replace(final, target)


def _trace(auto_model: Any, path: Path) -> None:
    import inspect

    import torch

    names = ["input_ids", "attention_mask"]
    if "token_type_ids" in inspect.signature(auto_model.forward).parameters:
        names.append("token_type_ids")

    class Hidden(torch.nn.Module):
        """Keyword call (newer transformers take extra positional parameters)."""

        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: Any) -> Any:
            return self.inner(**dict(zip(names, inputs, strict=True))).last_hidden_state

    sample = torch.ones((2, 8), dtype=torch.long)
    args = tuple(sample if n == "input_ids" else torch.ones_like(sample) for n in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]}
    import warnings

    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notes on opset choices, not ours to act on
        try:
            torch.onnx.export(
                Hidden(auto_model.eval()),
                args,
                str(path),
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=_OPSET,
                dynamo=False,
            )
        except Exception as exc:
            raise ConfigError(f"could not export the embedding model to ONNX: {exc}") from exc


def _fuse(source: Path, target: Path, config: Any) -> None:
    """ONNX Runtime's BERT fusions (SkipLayerNorm, BiasGelu): fewer, faster nodes to quantise."""
    import onnx
    from onnxruntime.transformers.optimizer import optimize_model

    heads = int(getattr(config, "num_attention_heads", 0) or 0)
    hidden = int(getattr(config, "hidden_size", 0) or 0)
    fused = optimize_model(
        str(source), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=1
    )
    # The quantiser's pre-processing (symbolic shape inference, then this same optimizer)
    # stops at the fused contrib ops; the fusion is done, the float type of the rest is given
    # to the quantiser, and the tag keeps it from logging through the root logger (which
    # configures logging in the caller's process).
    props = {p.key: p.value for p in fused.model.metadata_props}
    props["onnx.quant.pre_process"] = "onnxruntime.quant"
    onnx.helper.set_model_props(fused.model, props)
    fused.save_model_to_file(str(target))


def _quantise(source: Path, target: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        # the fused nodes carry no type that shape inference knows: they are float
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
