"""Where a simulator run sends its requests, besides the local engine: BatchChat's own API
server or any saved connection (app/remote). Qt-free; the panel and tests use it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.backend import RemoteBackend
from app.remote import Connection, RemoteClient, RemoteError

if TYPE_CHECKING:
    from app.settings import Settings

OWN_SERVER = "BatchChat server"


def own_server_connection(settings: Settings) -> Connection:
    """The app's API server (Server → API server) as the settings configure it; its model
    is whatever it serves (resolved by `open_target`)."""
    return Connection(f"http://127.0.0.1:{settings.server_port}",
                      api_key=settings.server_api_key or None, name=OWN_SERVER)


async def open_target(conn: Connection, max_concurrent: int) -> RemoteBackend:
    """A RemoteBackend on `conn`, at most `max_concurrent` requests in flight; without a
    model, the server's only one (RemoteError with the reason if it lists none or several,
    or cannot be asked)."""
    client = RemoteClient(conn)
    try:
        if not conn.model:
            models = await client.models()
            if len(models) != 1:
                raise RemoteError(f"{conn.name} serves {len(models)} models "
                                  f"({', '.join(models) or 'none'}); pick one in a connection")
            client.connection = conn.with_model(models[0])
    except BaseException:
        await client.close()
        raise
    return RemoteBackend(client, max_concurrent)
