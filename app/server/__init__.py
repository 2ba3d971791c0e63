"""An OpenAI-compatible HTTP server on the app's engine (aiohttp, on the running asyncio loop:
qasync's in the window, `asyncio.run`'s headless). Qt-free, like the rest of `app`."""

from .app import ApiServer, ServerConfig, is_loopback

__all__ = ["ApiServer", "ServerConfig", "is_loopback"]
