"""Where /v1/responses keeps its stored responses, awaited by the handler (issue #53).

Two kinds of store, one shape (put, get, delete): `batchchat serve`'s StoredResponses has a
connection of its own, thread-safe, so its calls run in a worker thread and a slow disk
never holds the event loop; the app's history entry (app/history/entries.py ApiResponses)
is bound to the loop's thread (sqlite3 refuses its connection elsewhere), so its calls run
on the loop, one row each, as the history's other writes do."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from ...storage.stored_responses import Stored


class ResponseStore(Protocol):
    def put(self, response_id: str, items: list[dict[str, Any]],
            response: dict[str, Any]) -> None: ...

    def get(self, response_id: str) -> Stored | None: ...

    def delete(self, response_id: str) -> bool: ...


class ResponseKeeper:
    """`store`'s calls awaited: in a worker thread, or on the loop when `on_loop`."""

    def __init__(self, store: ResponseStore, *, on_loop: bool = False) -> None:
        self.store = store
        self.on_loop = on_loop

    async def put(self, response_id: str, items: list[dict[str, Any]],
                  response: dict[str, Any]) -> None:
        if self.on_loop:
            self.store.put(response_id, items, response)
        else:
            await asyncio.to_thread(self.store.put, response_id, items, response)

    async def get(self, response_id: str) -> Stored | None:
        if self.on_loop:
            return self.store.get(response_id)
        return await asyncio.to_thread(self.store.get, response_id)

    async def delete(self, response_id: str) -> bool:
        if self.on_loop:
            return self.store.delete(response_id)
        return await asyncio.to_thread(self.store.delete, response_id)
