"""The app's local engine and a tab's way to a reply, split by job.

hosting (load and switch the model), routing (a tab's reply through its Backend, local or
remote: app/backend), frames (per-frame coalescing), generation (one reply), wait_poll
(waiting notes), switch (a model switch that waits for or stops the running replies),
prompt_size (a next prompt's tokens against the context, counted off the UI thread), and
facade: EngineBridge, which composes them. The engine itself, LocalTarget, is app.backend's
(local_target.py); Loader, the type of EngineBridge's loader, is re-exported here.
"""

from ..backend.local_target import Loader
from .facade import EngineBridge
from .generation import Generation, ReplyStats
from .hosting import BridgeState
from .prompt_size import PromptSize
from .routing import Route, check_params
from .switch import SWITCHED, Choice, Running

__all__ = ["SWITCHED", "BridgeState", "Choice", "EngineBridge", "Generation",
           "Loader", "PromptSize", "ReplyStats", "Route", "Running",
           "check_params"]
