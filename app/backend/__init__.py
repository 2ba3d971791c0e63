"""Where a request for a reply goes: the `Backend` protocol (protocol.py) and its two
implementations, the local engine (local.py) and a remote OpenAI-compatible server
(remote.py). Nothing else in app submits to the engine or to a server."""

from .local import LocalBackend, load_local
from .protocol import Backend, LoadBackend, Submission
from .remote import RemoteBackend

__all__ = ["Backend", "LoadBackend", "LocalBackend", "RemoteBackend", "Submission", "load_local"]
