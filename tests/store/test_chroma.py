"""The chroma backend's dense index: the store's HNSW settings on new collections, and an older
collection's search breadth raised by a writer, never by a reader."""

from __future__ import annotations

import uuid

import chromadb
import pytest

from corrective_rag.store.chroma import HNSW, folder_opener, open_collection


def _hnsw(collection) -> dict:
    return dict(collection.configuration_json["hnsw"])


def test_new_collections_use_the_store_hnsw_settings() -> None:
    """A collection the store makes has the store's space, build and search breadth, and links."""
    client = chromadb.EphemeralClient()
    name = f"hnsw-{uuid.uuid4().hex[:8]}"
    try:
        hnsw = _hnsw(open_collection(client, name))
    finally:
        client.delete_collection(name)
    assert dict(HNSW) == {key: hnsw[key] for key in HNSW}
    assert (200, 32, 400) == (hnsw["ef_construction"], hnsw["max_neighbors"], hnsw["ef_search"])


# chromadb warns about a collection without an embedding function when modifying it (ours never
# have one: the store embeds)
@pytest.mark.filterwarnings("ignore:legacy embedding function config")
def test_a_writer_raises_ef_search_of_an_older_collection_and_a_reader_does_not(tmp_path) -> None:
    """A collection made with chromadb's defaults searches wider once a writer opens it."""
    made = chromadb.PersistentClient(path=str(tmp_path))
    made.create_collection(
        "older", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    assert 100 == _hnsw(made.get_collection("older"))["ef_search"]  # chromadb's default

    reader = folder_opener(str(tmp_path), "older", read_only=True)()
    try:
        assert 100 == _hnsw(reader.collection)["ef_search"]
    finally:
        reader.close()
    writer = folder_opener(str(tmp_path), "older", read_only=False)()
    try:
        assert HNSW["ef_search"] == _hnsw(writer.collection)["ef_search"]
    finally:
        writer.close()
    assert HNSW["ef_search"] == _hnsw(made.get_collection("older"))["ef_search"]
