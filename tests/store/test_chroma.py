"""The chroma backend's dense index: the store's HNSW settings on new collections, and an older
collection's search breadth raised by a writer, never by a reader."""

from __future__ import annotations

import uuid

import chromadb
import pytest
from structlog.testing import capture_logs

from corrective_rag.store.chroma_open import HNSW, folder_opener, open_collection


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


class _BusyCollection:
    """A collection whose ``modify`` finds sqlite locked by another client ``busy`` times."""

    name = "busy"

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.configuration_json = {"hnsw": {"ef_search": 100}}

    def modify(self, configuration: dict) -> None:
        if self.busy:
            self.busy -= 1
            raise RuntimeError("Database error: (code: 5) database is locked")
        self.configuration_json = configuration


def test_raising_ef_search_waits_out_another_clients_write(monkeypatch) -> None:
    """sqlite's "database is locked" (another client writing the folder) is tried again."""
    from corrective_rag.store import chroma_open as chroma

    waits: list[float] = []
    monkeypatch.setattr(chroma.time, "sleep", waits.append)
    collection = _BusyCollection(busy=2)
    chroma._raise_ef_search(collection)
    assert HNSW["ef_search"] == collection.configuration_json["hnsw"]["ef_search"]
    assert 2 == len(waits)
    stuck = _BusyCollection(busy=99)  # locked throughout: logged, searched as it is
    with capture_logs() as logs:
        chroma._raise_ef_search(stuck)
    assert 100 == stuck.configuration_json["hnsw"]["ef_search"]
    assert ["chroma_ef_search_unchanged"] == [e["event"] for e in logs]
    assert chroma.BUSY_TRIES - 1 == len(waits) - 2
