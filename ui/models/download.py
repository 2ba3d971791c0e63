"""A pull (app.models.pull) on a worker thread, its progress and end as Qt signals."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal

from app.models.pull import PullCancelled, PullError, pull


class Download(QObject):
    """`start(repo)`; `progress(PullProgress)`, then `finished(snapshot path)`, or
    `failed(message, cancelled)`. Signals arrive on the UI thread (queued)."""

    progress = Signal(object)
    finished = Signal(str)
    failed = Signal(str, bool)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.cancel_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.repo = ""

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def start(self, repo: str) -> None:
        if self.running:
            return
        self.repo = repo
        self.cancel_event.clear()
        self.thread = threading.Thread(target=self._run, args=(repo,), daemon=True,
                                       name="model-download")
        self.thread.start()

    def cancel(self) -> None:
        """Stop after the chunk on its way; what arrived is kept for the next pull."""
        self.cancel_event.set()

    def _run(self, repo: str) -> None:
        try:
            snapshot = pull(repo, progress=self.progress.emit, cancel=self.cancel_event)
        except PullCancelled as e:
            self.failed.emit(str(e), True)
        except PullError as e:
            self.failed.emit(str(e), False)
        except Exception as e:  # never a silent dead thread: say what broke
            self.failed.emit(f"{repo}: the download failed: {type(e).__name__}: {e}", False)
        else:
            self.finished.emit(str(snapshot))
