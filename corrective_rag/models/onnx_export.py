"""A sentence-transformers model as an ONNX file, exported locally and cached on disk.

The export reads only the model's own folder (``torch.onnx.export``, TorchScript exporter: no hub,
no ``optimum``), fuses what ONNX Runtime's transformer optimizer fuses, and for ``"int8"``
quantises the weights with ONNX Runtime's own dynamic quantiser, per output channel (per-tensor
int8 moves all-MiniLM-L6-v2's vectors to a cosine of ~0.95 with torch's; per channel keeps it
near 0.995). The file is cached under a name keyed by the model folder, its weights' size and
modification time, the precision and :data:`EXPORT_VERSION`, written to a temporary file and
renamed into place, so that a reader sees a whole file or none, and a cached file that cannot
be loaded is exported again over it.

Beside each export lies its record (``NAME.onnx.json``, :class:`ExportRecord`): the file's
sha256, size and modification time. A reader trusts the file only when it matches its record
(see :func:`check_file`) and the export's own vectors of :data:`REFERENCE_TEXTS` match the
source model's (checked by the embedder on every load). Those reference vectors never come
from the cache folder, which anyone able to write an export can rewrite whole (file, record
and all): for the shipped all-MiniLM-L6-v2 they ship with the package
(``reference_vectors.json``, written by ``scripts/reference_vectors.py`` and checked against
torch by the tests; :func:`shipped_reference`), and for any other model they are computed with
torch from the model's own folder when the export is loaded. So a cached file that was altered
(a valid graph with other weights), even with a record rewritten to match it, is never used.

The record is read as an untrusted file (:func:`~corrective_rag.inputs.read_bounded_json`): a
record that is a device, a FIFO, 200,000 ``[`` or not UTF-8 is one line naming it, and the
model is exported again.

An export works in a folder ``.export-PID@HOST-XXXX`` beside the file; one left behind by an
exporter that was killed is removed by the next export (:func:`clean_stale_exports`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.inputs import read_bounded_json

__all__ = [
    "EXPORT_VERSION",
    "MIN_COSINE",
    "ONNX_PRECISIONS",
    "REFERENCE_TEXTS",
    "STALE_AFTER",
    "ExportRecord",
    "check_file",
    "clean_stale_exports",
    "default_cache_dir",
    "export_key",
    "export_onnx",
    "read_record",
    "record_path",
    "reference_vectors",
    "shipped_reference",
    "unwritable",
]

ONNX_PRECISIONS = ("int8", "float32")
# Bumped whenever the exported graph changes (inputs, opset, fusions, quantisation), so that a
# file cached by an older version is never read by a newer one.
EXPORT_VERSION = 1
_OPSET = 17  # the TorchScript exporter's well-trodden opset for BERT; ORT 1.16+ runs it
_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
# Texts of unrelated kinds (a question, prose, a title line): an export whose vectors of these
# match the source model's computes what the model computes, to the precision's tolerance.
REFERENCE_TEXTS = (
    "How do I create a temporary file?",
    "Sourdough bread rises through the fermentation of wild yeast and lactobacilli.",
    "The queen's gambit is a chess opening in which white offers a pawn.",
)
# The least cosine an export's vector of a reference text keeps with the source model's: float32
# gives torch's vectors to within 2e-5, int8 keeps at least 0.98 on every text measured (see
# docs/embeddings.md); an export with zeroed token embeddings falls far below either.
MIN_COSINE = {"float32": 0.9999, "int8": 0.98}
# A work folder whose exporter cannot be shown alive (another host's, or an older version's
# unnamed one) is stale after this long: an export takes seconds to a few minutes.
STALE_AFTER = 3600.0
_WORK = re.compile(r"^\.export-(\d+)@(.+)-[^-]+$")
_CHUNK = 1 << 20
_MAX_RECORD_BYTES = 1 << 16  # a record is four fields: a few hundred bytes
# The shipped model's vectors of REFERENCE_TEXTS (package data: the cache cannot rewrite them).
SHIPPED_REFERENCE = Path(__file__).with_name("reference_vectors.json")


def default_cache_dir() -> Path:
    """Where exported models are kept unless told otherwise, by the XDG convention.

    The first of ``$CORRECTIVE_RAG_CACHE/onnx``, ``$XDG_CACHE_HOME/corrective_rag/onnx``
    (an absolute path only, as the XDG Base Directory specification says) and
    ``~/.cache/corrective_rag/onnx``. These two are the only environment variables the
    library reads: where a user's caches live is the environment's to say, as huggingface_hub's
    ``HF_HOME`` and torch's ``TORCH_HOME`` are.
    """
    own = os.environ.get("CORRECTIVE_RAG_CACHE", "")
    if own:
        return Path(own).expanduser() / "onnx"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "corrective_rag" / "onnx"
    return Path.home() / ".cache" / "corrective_rag" / "onnx"


def unwritable(folder: Path) -> str | None:
    """Why an export cannot be written into ``folder`` (created if missing), or None if it can."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError as exc:
        return str(exc)
    return None


@dataclass(frozen=True, slots=True)
class ExportRecord:
    """What an export's file was when it was written.

    Attributes:
        sha256: the ONNX file's sha256 (hex).
        size: its size in bytes.
        mtime_ns: its modification time, ns.
        precision: ``"float32"`` or ``"int8"``.
    """

    sha256: str
    size: int
    mtime_ns: int
    precision: str


def record_path(target: Path) -> Path:
    """Where the record of the export ``target`` lies."""
    return target.with_name(target.name + ".json")


def read_record(target: Path) -> ExportRecord:
    """The record beside ``target``, read as an untrusted file.

    Raises:
        InputError: one line naming the record: missing, not a regular file, too large, not
            UTF-8, nested too deeply, not JSON, or without the four fields (the caller exports
            the model again).
    """
    path = record_path(target)
    # depth 4: records written before 0.1 held their vectors too (read, and ignored)
    raw = read_bounded_json(path, max_bytes=_MAX_RECORD_BYTES, max_depth=4)
    try:
        return ExportRecord(
            sha256=str(raw["sha256"]),
            size=int(raw["size"]),
            mtime_ns=int(raw["mtime_ns"]),
            precision=str(raw["precision"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not an export record ({type(exc).__name__}: {exc})") from None


def shipped_reference(folder: str) -> list[list[float]] | None:
    """The shipped vectors of :data:`REFERENCE_TEXTS` when ``folder`` holds the shipped model.

    The shipped all-MiniLM-L6-v2 is recognised by its weights file's name and size; any other
    folder (another model, another release of it) gets ``None``, and its reference is computed
    with torch (:func:`reference_vectors`).
    """
    shipped = read_bounded_json(SHIPPED_REFERENCE, max_bytes=1 << 20, error=ConfigError)
    weights = Path(folder) / str(shipped["weights"])
    try:
        if weights.stat().st_size != int(shipped["weights_size"]):
            return None
    except OSError:
        return None
    if tuple(shipped["texts"]) != REFERENCE_TEXTS:  # pragma: no cover - the tests pin them
        return None
    return [[float(x) for x in vector] for vector in shipped["vectors"]]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def check_file(target: Path, record: ExportRecord) -> str | None:
    """Why ``target`` is not the file ``record`` describes, or None when it is.

    The file is hashed only when its size or modification time differ from the record's (a
    copy, or a change): hashing the 87 MB float32 export takes about 0.17 s, a quarter of a
    load, while its size and time are one ``stat``. A change that keeps both (``touch -r``), or
    a record rewritten to match a changed file, is left to the reference vectors, which the
    embedder checks on every load against vectors the cache cannot rewrite.
    """
    info = target.stat()
    if (info.st_size, info.st_mtime_ns) == (record.size, record.mtime_ns):
        return None
    if _sha256(target) == record.sha256:
        return None
    return f"its sha256 is not the {record.sha256[:16]}... recorded at export"


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
        clean_stale_exports(target.parent)
        _export(model, target, precision)
    except OSError as exc:
        raise ConfigError(f"could not write the ONNX export to {target.parent}: {exc}") from exc


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", socket.gethostname()) or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone, or no pid a process could have
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _last_touched(folder: Path) -> float:
    """The latest modification time of ``folder`` and of what it holds."""
    times = [folder.stat().st_mtime]
    with contextlib.suppress(OSError):
        times += [entry.stat().st_mtime for entry in folder.iterdir()]
    return max(times)


def clean_stale_exports(folder: Path, *, now: float | None = None) -> list[Path]:
    """Remove the work folders of exports that ended without finishing; return them.

    A work folder is ``.export-PID@HOST-XXXX``: on this host it is stale when no process has
    that pid (its exporter was killed), so a live exporter's folder, in this process or
    another, is never touched. A folder of another host, or one of an older version with no
    pid in its name, is stale once nothing in it changed for :data:`STALE_AFTER` seconds.
    Folders that vanish meanwhile (another exporter cleaning too) are skipped.
    """
    now = time.time() if now is None else now
    host = _host()
    removed = []
    for entry in folder.glob(".export-*"):
        try:
            if not entry.is_dir() or entry.is_symlink():
                continue
            match = _WORK.match(entry.name)
            if match and match.group(2) == host:
                stale = not _alive(int(match.group(1)))
            else:
                stale = now - _last_touched(entry) > STALE_AFTER
        except OSError:
            continue
        if stale:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def reference_vectors(model: Any) -> list[list[float]]:
    """The source model's vectors of :data:`REFERENCE_TEXTS`, each text alone (torch)."""
    vectors = model.encode(
        list(REFERENCE_TEXTS),
        batch_size=1,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return [[float(x) for x in vector] for vector in vectors]


def _export(model: Any, target: Path, precision: str) -> None:
    work_prefix = f".export-{os.getpid()}@{_host()}-"
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=work_prefix) as work:
        plain = Path(work) / "plain.onnx"
        _trace(model[0].auto_model, plain)
        fused = Path(work) / "fused.onnx"
        _fuse(plain, fused, model[0].auto_model.config)
        final = fused
        if precision == "int8":
            final = Path(work) / "int8.onnx"
            _quantise(fused, final)
        info = final.stat()
        record = {
            "sha256": _sha256(final),
            "size": info.st_size,
            "mtime_ns": info.st_mtime_ns,  # a rename keeps it
            "precision": precision,
        }
        written = Path(work) / "record.json"
        written.write_text(json.dumps(record), encoding="utf-8")
        # The work folder lies beside target (same file system): atomic renames publish it,
        # the record first. A reader between the two sees a record that does not match the
        # file (or no file) and exports again: never a file taken for another's record.
        os.replace(written, record_path(target))
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
