"""Where each shipped engine is opened: a name, and the module function that makes its opener.

The store's constructors (:meth:`~corrective_rag.store.hybrid.HybridStore.in_memory`,
``open``, ``connect``, ``qdrant``) name their engine here instead of importing every engine
module: the module is imported when a store on it is made, so importing the store facade loads
neither the chromadb nor the Qdrant adapter, and no engine module depends on the facade's.

An entry's function checks its arguments (a bad name or folder fails at construction) and
returns an opener: a callable that opens the backend (a
:class:`~corrective_rag.store.backend.Backend`) when the store first needs it. A new engine is
one module (its ``Backend`` and such a function) and one line below; the store's constructor
for it is ``HybridStore(open_engine("name", ...), ...)``.

This table is the package's own wiring, not a plugin point: a user's engine is an object passed
to ``HybridStore(backend)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.store.backend import Backend

__all__ = ["ENGINES", "open_engine"]

# name -> "module:function": the function's arguments are the engine's own settings.
ENGINES: Mapping[str, str] = {
    "chroma": "corrective_rag.store.chroma_open:ephemeral_opener",
    "chroma-folder": "corrective_rag.store.chroma_open:checked_folder_opener",
    "chroma-server": "corrective_rag.store.chroma_open:server_opener",
    "qdrant": "corrective_rag.store.qdrant:store_opener",
}


def open_engine(name: str, *args: Any, **settings: Any) -> Callable[[], Backend]:
    """The opener of engine ``name`` with these settings, its module imported now.

    Raises:
        ConfigError: no engine has that name, or a setting is bad (the engine's own checks).
        StoreError: a folder that is not a store of that engine (the engine's own checks).
    """
    where = ENGINES.get(name)
    if where is None:
        raise ConfigError(f"unknown store engine {name!r} (engines: {', '.join(sorted(ENGINES))})")
    module, _, function = where.partition(":")
    make: Callable[..., Callable[[], Backend]] = getattr(importlib.import_module(module), function)
    return make(*args, **settings)
