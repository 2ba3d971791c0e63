"""Which backend answers a chat: the local engine (None) or a saved connection by name.

`RemoteBackends` hands out one `RemoteClient` per connection (one aiohttp session each) and
replaces it when the connection's settings change (a new URL, key or model)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .client import RemoteClient
from .connection import Connection

LOCAL = None  # the local engine's backend id


class UnknownBackend(LookupError):
    """A tab asks for a connection that was deleted or renamed."""


class RemoteBackends:
    def __init__(self, find: Callable[[str], Connection | None] | None = None) -> None:
        self.find = find or (lambda _name: None)  # the settings' lookup (AppContext sets it)
        self._clients: dict[str, RemoteClient] = {}
        self._old: list[RemoteClient] = []  # replaced clients: closed at shutdown

    def connection(self, name: str) -> Connection:
        conn = self.find(name)
        if conn is None:
            raise UnknownBackend(f"The connection {name!r} no longer exists; pick another "
                                 "backend for this tab.")
        return conn

    def client(self, name: str, loop: asyncio.AbstractEventLoop | None = None) -> RemoteClient:
        conn = self.connection(name)
        client = self._clients.get(name)
        if client is None or client.connection != conn:
            if client is not None:
                self._old.append(client)  # its streams finish on their own
            # bound to the app's loop: tabs submit from Qt slots, outside a coroutine
            client = self._clients[name] = RemoteClient(conn, loop or _app_loop())
        return client

    async def close(self) -> None:
        clients = [*self._clients.values(), *self._old]
        self._clients.clear()
        self._old.clear()
        for client in clients:
            await client.close()


def _app_loop() -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.get_event_loop()  # the loop set for this thread (qasync's)
