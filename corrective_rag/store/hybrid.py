"""HybridStore: BM25 and dense legs over the same documents, fused into one ranking.

Open one with :meth:`HybridStore.in_memory`, :meth:`HybridStore.open` (a directory on disk) or
:meth:`HybridStore.connect` (a chroma server). Writes go to the dense side first, then BM25; if
either fails the other is rolled back, so both sides always hold the same documents.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog

from corrective_rag.errors import (
    ConfigError,
    CorrectiveRAGError,
    InputError,
    StoreConsistencyError,
    StoreError,
)
from corrective_rag.inputs import check_query
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.protocols import Embedder
from corrective_rag.store.checks import check_unique, validate_documents, validate_ids
from corrective_rag.store.dense import DenseIndex, Record
from corrective_rag.store.fusion import ConvexFusion, Fusion
from corrective_rag.store.persist import WriterLock, bm25_path, load_consistent, new_stamp, rebuild
from corrective_rag.text import tokenize
from corrective_rag.types import Document, Hit, LegScore

__all__ = ["DEFAULT_ALPHA", "DEFAULT_CANDIDATES", "DEFAULT_COLLECTION", "MAX_TOP_K", "HybridStore"]

log = structlog.get_logger(__name__)

DEFAULT_COLLECTION = "corrective_rag"
# Each leg hands over its best 100: deep enough that a document one leg ranks ~50th can still be
# lifted by the other, cheap enough (one chroma query, one argpartition) for ~10 ms queries.
DEFAULT_CANDIDATES = 100
# Equal weights on both legs' normalised scores: no leg is trusted more a priori. Measured over
# cisi, cranfield, cacm and hotpotqa-500 (README), it beat RRF k=60 and alpha 0.3-0.7 on average.
DEFAULT_ALPHA = 0.5
MAX_TOP_K = 10_000  # a sanity bound: larger requests are a bug in the caller, not a search
LEGS = ("bm25", "dense")


def _wrapped(exc: Exception) -> StoreError:
    """The error a failed, rolled-back write raises (keeps our own store errors as they are)."""
    if isinstance(exc, StoreError):
        return StoreError(f"write failed and was rolled back: {exc}")
    return StoreError(f"write failed and was rolled back: {type(exc).__name__}: {exc}")


@contextlib.contextmanager
def _reading(what: str) -> Iterator[None]:
    """Turn a foreign failure while reading (chroma down, connection dropped) into StoreError.

    Callers, such as a batch writing one error line per failed query, then see the package's
    own error, never an httpx or chromadb exception.
    """
    try:
        yield
    except CorrectiveRAGError:
        raise
    except Exception as exc:
        raise StoreError(f"{what} failed: {type(exc).__name__}: {exc}") from exc


class HybridStore:
    """Documents indexed twice, BM25 and dense (chromadb), searched together and fused.

    Prefer the classmethods :meth:`in_memory`, :meth:`open` and :meth:`connect`.

    Args:
        client: a chromadb client.
        collection: the chroma collection name (3-512 characters).
        embedder: computes embeddings; ``SentenceTransformerEmbedder()`` (offline
            all-MiniLM-L6-v2) by default, created lazily.
        fusion: how the legs are fused; ``ConvexFusion(0.5)`` by default (equal weights on
            min-max normalised scores: the best mean nDCG@10 over the four benchmark
            collections, and better than either leg alone on each); ``RRFusion()`` for RRF.
        candidates: how many candidates each leg hands to fusion (at least ``top_k`` is used).
        directory: for persistent stores, where the BM25 side is saved (and locked).
        prefer_fast_bm25: use ``rank_bm25_rs`` when installed (identical scores to rank_bm25).
    """

    def __init__(
        self,
        client: Any,
        *,
        collection: str = DEFAULT_COLLECTION,
        embedder: Embedder | None = None,
        fusion: Fusion | None = None,
        candidates: int = DEFAULT_CANDIDATES,
        directory: str | None = None,
        prefer_fast_bm25: bool = True,
        _drop_on_close: bool = False,
        _writer: WriterLock | None = None,
    ) -> None:
        if not isinstance(collection, str) or not 3 <= len(collection) <= 512:
            raise ConfigError(f"collection name must have 3-512 characters, got {collection!r}")
        if isinstance(candidates, bool) or not isinstance(candidates, int):
            raise ConfigError(f"candidates must be an int, got {candidates!r}")
        if not 1 <= candidates <= MAX_TOP_K:
            raise ConfigError(f"candidates must be in 1..{MAX_TOP_K}, got {candidates}")
        if fusion is not None and not callable(getattr(fusion, "fuse", None)):
            raise ConfigError("fusion must have a fuse(runs) method")
        if embedder is not None and not callable(getattr(embedder, "embed", None)):
            raise ConfigError("embedder must have an embed(texts) method")
        self.embedder: Embedder = embedder or SentenceTransformerEmbedder()
        self.fusion: Fusion = fusion or ConvexFusion(DEFAULT_ALPHA)
        self.candidates = candidates
        self.collection_name = collection
        self.directory = directory
        self._client = client
        self._drop_on_close = _drop_on_close
        self._lock = threading.RLock()
        self._writer: WriterLock | None = None
        self._closed = False
        self._stamp: str | None = None
        try:
            chroma = client.get_or_create_collection(
                collection, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
            )
        except Exception as exc:
            raise StoreError(f"cannot open chroma collection {collection!r}: {exc}") from exc
        self._dense = DenseIndex(chroma, self.embedder)
        if directory is not None:
            self._writer = _writer or WriterLock(directory)
            try:
                self._bm25, self._stamp = load_consistent(
                    directory, collection, self._dense, prefer_fast=prefer_fast_bm25
                )
            except BaseException:
                self._writer.release()
                raise
        else:
            self._bm25 = rebuild(self._dense, prefer_fast=prefer_fast_bm25)

    # -- constructors ------------------------------------------------------------------------

    @classmethod
    def in_memory(cls, *, collection: str | None = None, **kwargs: Any) -> HybridStore:
        """A store that lives in this process only (chromadb ``EphemeralClient``).

        Every ephemeral client in a process shares one backend, so each store gets its own
        collection (a fresh name unless given), dropped again on :meth:`close`.
        """
        import chromadb

        name = collection or f"crag-{uuid.uuid4().hex}"
        return cls(chromadb.EphemeralClient(), collection=name, _drop_on_close=True, **kwargs)

    @classmethod
    def open(cls, path: str | os.PathLike[str], **kwargs: Any) -> HybridStore:
        """Open (or create) a persistent store in directory ``path``, locked for this writer.

        Raises:
            StoreLockedError: another store holds the directory.
            StoreConsistencyError: the BM25 side disagrees with chroma and cannot be rebuilt.
        """
        import chromadb

        directory = str(Path(path).resolve())
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise ConfigError(f"{directory} exists and is not a directory")
        os.makedirs(directory, exist_ok=True)
        # Lock before chroma opens its files, so a second writer is refused before it touches them.
        lock = WriterLock(directory)
        try:
            client = chromadb.PersistentClient(path=directory)
            return cls(client, directory=directory, _writer=lock, **kwargs)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def connect(
        cls,
        host: str,
        port: int,
        *,
        ssl: bool = False,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> HybridStore:
        """Use a chroma server (``chroma run``); the BM25 side is built from its documents.

        Writes made through this store keep both sides in step; writes other clients make to
        the server are seen by the dense leg at once and by BM25 only after reconnecting.
        """
        import chromadb

        if not isinstance(host, str) or not host:
            raise ConfigError(f"host must be a non-empty string, got {host!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigError(f"port must be in 1..65535, got {port!r}")
        try:
            client = chromadb.HttpClient(host=host, port=port, ssl=ssl, headers=dict(headers or {}))
        except Exception as exc:
            raise StoreError(f"cannot reach chroma server {host}:{port}: {exc}") from exc
        return cls(client, **kwargs)

    # -- reading -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._bm25)

    def count(self) -> int:
        """Number of documents stored."""
        self._check_open()
        return len(self._bm25)

    def ids(self, *, where: Mapping[str, Any] | None = None) -> list[str]:
        """All document ids, in insertion order; with ``where``, those whose metadata match."""
        self._check_open()
        if where is None:
            return self._bm25.ids()
        if not isinstance(where, Mapping) or not where:
            raise InputError(f"where must be a non-empty mapping or None, got {where!r}")
        with _reading("ids"):
            allowed = self._dense.matching_ids(where)
        return [i for i in self._bm25.ids() if i in allowed]

    def sources(self) -> set[str]:
        """Every distinct ``source`` metadata value: the files the documents came from."""
        self._check_open()
        with _reading("sources"):
            return self._dense.metadata_values("source")

    def get(self, ids: Iterable[str]) -> list[Document]:
        """The stored documents among ``ids``, in the order asked; unknown ids are skipped."""
        self._check_open()
        wanted = validate_ids(ids)
        with _reading("get"):
            found = self._dense.documents(wanted) if wanted else {}
        return [found[i] for i in wanted if i in found]

    def idf(self, term: str) -> float:
        """Corpus idf of ``term`` as BM25 weighs it, after the store's tokenizer.

        A stop word (no token) gives 0.0, as does a term absent from the corpus.

        Raises:
            InputError: ``term`` is not a string or tokenizes into more than one token.
        """
        self._check_open()
        if not isinstance(term, str):
            raise InputError(f"term must be a string, got {type(term).__name__}")
        tokens = tokenize(term)
        if len(tokens) > 1:
            raise InputError(f"idf() takes one term, {term!r} has {len(tokens)} tokens")
        return self._bm25.idf(tokens[0]) if tokens else 0.0

    def retrieve(
        self, query: str, *, top_k: int = 10, where: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Search both legs, fuse, and return at most ``top_k`` hits ranked 1..n.

        Args:
            query: free text.
            top_k: how many hits to return (1..10,000).
            where: a chromadb metadata filter (e.g. ``{"lang": "en"}``,
                ``{"$or": [{"year": 2020}, {"year": {"$in": [2021, 2022]}}]}``), applied to
                both legs.
        """
        self._check_open()
        self._check_query(query, top_k, where)
        with self._lock, _reading("retrieve"):
            runs = self._runs(query, max(self.candidates, top_k), where, ("bm25", "dense"))
            if runs is None:
                return []
            fused = self.fusion.fuse([runs["bm25"], runs["dense"]])[:top_k]
            return self._hits(fused, runs)

    def search(
        self,
        query: str,
        *,
        leg: str,
        top_k: int = 10,
        where: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """Search one leg only (``"bm25"`` or ``"dense"``), unfused: for ablations and debugging.

        Each hit's ``score`` is the leg's own score (BM25 score or cosine similarity).
        """
        self._check_open()
        if leg not in LEGS:
            raise ConfigError(f"leg must be one of {LEGS}, got {leg!r}")
        self._check_query(query, top_k, where)
        with self._lock, _reading("search"):
            runs = self._runs(query, top_k, where, (leg,))
            if runs is None:
                return []
            return self._hits(runs[leg], runs)

    @staticmethod
    def _check_query(query: str, top_k: int, where: Mapping[str, Any] | None) -> None:
        check_query(query, what="query")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise ConfigError(f"top_k must be an int in 1..{MAX_TOP_K}, got {top_k!r}")
        if where is not None and (not isinstance(where, Mapping) or not where):
            raise InputError(f"where must be a non-empty mapping or None, got {where!r}")

    def _runs(
        self, query: str, depth: int, where: Mapping[str, Any] | None, legs: Sequence[str]
    ) -> dict[str, list[tuple[str, float]]] | None:
        """Each leg's ``depth`` best ``(id, score)`` pairs; ``None``: the filter matches nothing."""
        allowed = self._dense.matching_ids(where) if where else None
        if allowed is not None and not allowed:
            return None
        runs: dict[str, list[tuple[str, float]]] = {}
        if "bm25" in legs:
            runs["bm25"] = self._bm25.top_k(query, depth, allowed=allowed)
        if "dense" in legs:
            vector = self.embedder.embed([query])[0]
            runs["dense"] = self._dense.query(vector, depth, where)
        return runs

    def _hits(
        self, ranked: Sequence[tuple[str, float]], runs: Mapping[str, Sequence[tuple[str, float]]]
    ) -> list[Hit]:
        documents = self._dense.documents([doc_id for doc_id, _ in ranked])
        legs: dict[str, list[LegScore]] = {}
        for name, run in runs.items():
            for rank, (doc_id, score) in enumerate(run, start=1):
                legs.setdefault(doc_id, []).append(LegScore(name, rank, score))
        if len(documents) < len(ranked):  # another client deleted them on a shared server
            log.warning("hits_vanished", missing=len(ranked) - len(documents))
        found = [(doc_id, score) for doc_id, score in ranked if doc_id in documents]
        return [
            Hit(documents[doc_id], score, rank, tuple(legs.get(doc_id, ())))
            for rank, (doc_id, score) in enumerate(found, start=1)
        ]

    # -- writing -----------------------------------------------------------------------------

    def add(self, documents: Iterable[Document]) -> None:
        """Add new documents.

        Raises:
            DuplicateIdError: an id appears twice in ``documents``.
            InputError: a document is invalid or its id is already stored (use :meth:`upsert`).
            StoreError: the write failed; nothing was written.
        """
        self._write(validate_documents(documents), replace=False)

    def upsert(self, documents: Iterable[Document]) -> None:
        """Add documents or replace those with the same id; unchanged texts are not re-embedded."""
        self._write(validate_documents(documents), replace=True)

    def delete(self, ids: Iterable[str]) -> int:
        """Delete documents by id; unknown ids are ignored. Returns how many were deleted."""
        wanted = validate_ids(ids)
        check_unique(wanted)
        with self._lock:
            self._check_open()
            previous = self._dense.records(wanted) if wanted else {}
            if not previous:
                return 0
            gone = list(previous)
            old_tokens = {i: self._bm25.tokens(i) for i in gone}

            def change() -> None:
                self._dense.delete(gone)
                self._bm25.delete(gone)

            self._apply(change, gone, previous, old_tokens)
        log.debug("store_deleted", documents=len(gone))
        return len(gone)

    def _write(self, docs: list[Document], *, replace: bool) -> None:
        if not docs:
            return
        ids = [d.id for d in docs]
        with self._lock:
            self._check_open()
            previous = self._dense.records(ids)
            if previous and not replace:
                shown = ", ".join(repr(i) for i in sorted(previous)[:10])
                raise InputError(f"{len(previous)} ids already stored: {shown} (use upsert)")
            try:  # embedding may fail (model missing): nothing has been written yet
                embeddings = self._dense.embed_documents(docs, previous)
            except (ConfigError, StoreError):
                raise
            except Exception as exc:
                raise StoreError(f"embedding failed, nothing written: {exc}") from exc
            old_tokens = {i: self._bm25.tokens(i) for i in ids if i in self._bm25}

            def change() -> None:
                self._dense.write(docs, embeddings, previous)
                self._bm25.upsert((d.id, d.text) for d in docs)

            self._apply(change, ids, previous, old_tokens)
        log.debug("store_written", documents=len(docs), replace=replace)

    def _apply(
        self,
        change: Callable[[], None],
        ids: Sequence[str],
        previous: Mapping[str, Record],
        old_tokens: Mapping[str, list[str]],
    ) -> None:
        """Run ``change`` on both sides and commit; on any failure put both sides back."""
        try:
            change()
            self._commit()
        except Exception as exc:
            self._rollback(ids, previous, old_tokens)
            raise _wrapped(exc) from exc
        except BaseException:
            self._rollback(ids, previous, old_tokens)
            raise

    def _commit(self) -> None:
        """Stamp both persistent sides with a fresh stamp (file first, then chroma)."""
        if self.directory is None:
            return
        stamp = new_stamp()
        self._bm25.save(bm25_path(self.directory, self.collection_name), stamp)
        self._dense.set_stamp(stamp)
        self._stamp = stamp

    def _rollback(
        self,
        ids: Sequence[str],
        previous: Mapping[str, Record],
        old_tokens: Mapping[str, list[str]],
    ) -> None:
        try:
            self._dense.restore(ids, previous)
            self._bm25.delete([i for i in ids if i not in old_tokens])
            self._bm25.put_tokens(old_tokens)
            if self.directory is not None and self._stamp is not None:
                self._bm25.save(bm25_path(self.directory, self.collection_name), self._stamp)
                self._dense.set_stamp(self._stamp)
        except Exception as exc:
            log.error("store_rollback_failed", error=str(exc))
            raise StoreConsistencyError(
                f"a failed write could not be rolled back ({exc}); reopen the store to repair it"
            ) from exc
        log.warning("store_write_rolled_back", documents=len(ids))

    # -- lifetime ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    def close(self) -> None:
        """Release the writer lock (persistent stores) or drop the collection (in-memory)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._drop_on_close:
                try:
                    self._client.delete_collection(self.collection_name)
                except Exception as exc:  # already gone: nothing to free
                    log.debug("collection_drop_failed", error=str(exc))
            if self._writer is not None:
                self._writer.release()

    def __enter__(self) -> HybridStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
