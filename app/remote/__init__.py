"""Chat and load-test against any OpenAI-compatible server (vLLM, SGLang, llama.cpp's server,
mlx_lm.server, BatchChat's own): Qt-free, aiohttp on the running asyncio loop, no MLX.

`RemoteStream` is a drop-in for the engine's `RequestStream` (what conversations, the engine
bridge and the simulator consume); app/backend/remote.py's RemoteBackend submits through a
`RemoteClient`.
"""

from .client import RemoteClient
from .connection import Connection, ConnectionConfigError, RemoteError, list_models
from .stream import RemoteStream

__all__ = ["Connection", "ConnectionConfigError", "RemoteClient", "RemoteError",
           "RemoteStream", "list_models"]
