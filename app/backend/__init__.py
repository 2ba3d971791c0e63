"""Where a request for a reply goes: the `Backend` protocol (protocol.py) and its two
implementations, the local engine (local.py, over local_target.py's LocalTarget: the one
app module that runs the Engine) and a remote OpenAI-compatible server (remote.py). Nothing
else in app submits to the engine or to a server."""

from .local import LocalBackend, load_local
from .local_target import Loader, LocalTarget
from .protocol import Backend, LoadBackend, Submission
from .remote import RemoteBackend

__all__ = ["Backend", "LoadBackend", "LocalBackend", "LocalTarget", "Loader", "RemoteBackend",
           "Submission", "load_local"]
