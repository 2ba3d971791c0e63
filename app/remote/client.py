"""`RemoteClient`: one connection's HTTP session and the streams it starts."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import aiohttp

from .body import sampling_of
from .connection import Connection, list_models
from .stream import RemoteStream

if TYPE_CHECKING:
    from engine.public import SamplingParams

    from .limiter import Limiter

_ids = itertools.count(1)


class RemoteClient:
    """Submits chat requests to one server on the running asyncio loop (qasync's in the
    app). The aiohttp session opens with the first request; `close()` ends everything."""

    def __init__(self, conn: Connection, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.connection = conn
        self._loop = loop  # for submits from outside a coroutine (a Qt slot); else running
        self._session: aiohttp.ClientSession | None = None
        self._live: set[RemoteStream] = set()
        self._done_chunks = 0  # text chunks of finished streams (the stats' client view)

    @property
    def description(self) -> str:
        return self.connection.describe()

    def submit(self, messages: Sequence[Mapping[str, Any]], *,
               params: SamplingParams | Mapping[str, Any] | None = None,
               priority: Any = "interactive", tag: str | None = None,
               limiter: Limiter | None = None,
               extra_body: Mapping[str, Any] | None = None) -> RemoteStream:
        """Start a streamed reply at once; failures arrive on the stream, never raised here
        (bad sampling settings raise ValueError, as the engine's would). Needs a model.
        `extra_body`: OpenAI fields beyond sampling (response_format, tools), sent as given."""
        if not self.connection.model:
            raise ValueError(f"{self.connection.name}: no model chosen for this connection")
        sampling = sampling_of(params)
        stream = RemoteStream(f"remote-{next(_ids)}", self.connection, self._open_session(),
                              messages, sampling, priority=priority_name(priority), tag=tag,
                              limiter=limiter, extra_body=extra_body)
        self._live.add(stream)
        stream.start(self._loop)
        assert stream._task is not None
        stream._task.add_done_callback(lambda _: self._stream_done(stream))
        return stream

    def _stream_done(self, stream: RemoteStream) -> None:
        if stream in self._live:
            self._live.discard(stream)
            self._done_chunks += stream.chunks

    @property
    def in_flight(self) -> int:
        """Requests of this client still streaming."""
        return len(self._live)

    @property
    def chunks_received(self) -> int:
        """Text chunks received so far, all requests (about one token each)."""
        return self._done_chunks + sum(s.chunks for s in self._live)

    async def models(self) -> list[str]:
        return await list_models(self.connection, self._open_session())

    async def close(self) -> None:
        """Cancel what is streaming and close the session."""
        live = list(self._live)
        for stream in live:
            stream.cancel()
        tasks = [s._task for s in live if s._task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # limit=0: no hidden pool queue; RemoteBackend's limiter is the only limit. The
            # loop is named: a chat tab submits from a Qt slot, outside a running coroutine.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, loop=self._loop))
        return self._session


def priority_name(priority: Any) -> str:
    """"background" for the engine's Priority.BACKGROUND or the string (as RequestStats)."""
    return str(getattr(priority, "name", priority)).lower()
