"""The last few image prompts the model's processor made, by what they were made from.

Decoding and resizing an image (the processor) takes from milliseconds to far more for a
large photo. A caller on an event loop runs it in a worker thread first (the API server
asks `Engine.prompt_tokens` off the loop before it submits), so the submit on the loop
finds the same prompt here instead of stalling every other stream on that loop.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

# prompts: one made off the loop is asked for again at once (a count, then the send), so
# two are enough, and each holds its images' pixel arrays (a tiled photo: tens of MB)
KEPT = 2


class PreparedPrompts:
    """A small least-recently-used map of prepared prompts, safe from any thread."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._items: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> Any:
        """The prompt made for `key`, or None."""
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple[Any, ...], prompt: Any) -> None:
        with self._lock:
            self._items[key] = prompt
            self._items.move_to_end(key)
            while len(self._items) > self._kept:
                self._items.popitem(last=False)
