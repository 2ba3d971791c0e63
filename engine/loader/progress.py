"""Load progress: what `Engine.load(progress=...)` reports while a model loads (no mlx here).

A progress callback gets `(stage, fraction)`: a short label ("reading file", "converting
layers", "tokenizer", "starting the engine", "warming up") and the whole load's fraction
done, 0.0 … 1.0, never decreasing. It runs on the loading thread: a UI must hand it to its
own thread itself.
"""

from __future__ import annotations

from collections.abc import Callable

LoadProgress = Callable[[str, float], None]

# Each stage's share of the whole load (roughly its share of the bundled model's load time).
STAGES: dict[str, tuple[float, float]] = {
    "fetching the bundled model": (0.0, 0.05),
    "reading file": (0.05, 0.25),
    "converting layers": (0.25, 0.8),
    "tokenizer": (0.8, 0.9),
    "starting the engine": (0.9, 0.95),
    # the first reply's one-time costs (engine/warm_up.py): seconds where MLX compiles kernels
    "warming up": (0.95, 1.0),
}


class ProgressReporter:
    """Maps a stage's own 0…1 onto the whole load's fraction and calls the callback (if
    any); a callback that raises is not the loader's problem, so it is dropped."""

    def __init__(self, callback: LoadProgress | None) -> None:
        self._callback = callback
        self.last = 0.0
        self.stage = ""

    def __call__(self, stage: str, done: float = 0.0) -> None:
        if self._callback is None:
            return
        self.stage = stage
        lo, hi = STAGES.get(stage, (self.last, self.last))
        fraction = max(self.last, lo + (hi - lo) * min(1.0, max(0.0, done)))
        self.last = fraction
        try:
            self._callback(stage, fraction)
        except Exception:  # noqa: BLE001 - a broken progress view must not fail the load
            self._callback = None

    def finish(self) -> None:
        """The load is done: 100 %, in its last stage's name."""
        self.last = 1.0
        self(self.stage or "starting the engine", 1.0)
