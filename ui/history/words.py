"""The history's state in words for the user: the status bar, the banner, the question
before quitting and the notices at start. app/history/writer.py reports facts
(`HistoryWriter.status()`); this is the one place they become sentences."""

from __future__ import annotations

from app.history.status import HistoryStatus


def _changes(n: int) -> str:
    return f"{n} unsaved change{'s' if n != 1 else ''}"


def status_text(status: HistoryStatus) -> str:
    """One line for the status bar: empty while everything is saved."""
    if status.pending == 0:
        return ""
    return f"History: {_changes(status.pending)}, retrying"


def set_aside_text(status: HistoryStatus) -> str:
    """What to tell the user about the writes set aside ("" if none)."""
    n = status.set_aside
    if n == 0:
        return ""
    where = status.set_aside_path
    kept = f"It is kept in {where}." if where else "It is kept in memory only."
    return (f"{n} change{'s' if n != 1 else ''} to the history could not be saved and "
            f"{'were' if n != 1 else 'was'} set aside; everything else is saved as "
            f"usual. Latest reason: {status.latest_set_aside_reason} {kept}")


def unsaved_text(status: HistoryStatus) -> str:
    """Why changes are unsaved, for the banner and the quit question ("" if none)."""
    n, err = status.pending, status.last_error
    if n == 0 and not status.in_memory_only:
        return ""
    if status.read_only_path is not None:
        head = f"The history file {status.read_only_path} is read-only: past chats are shown"
    else:
        head = f"The history cannot be saved ({err})" if err else "The history is not open"
    return (f"{head}; new chats and changes are kept in memory only ({_changes(n)}). "
            "Save them to another file to keep them.")


def replay_text(status: HistoryStatus) -> str | None:
    """What the start did with the writes an earlier quit set aside (None: nothing)."""
    replay = status.start_replay
    texts = [f"Changes set aside when BatchChat last quit are kept in {path}; they will be "
             "written back once the history can be saved." for path in replay.kept]
    texts += [report.summary() for report in replay.reports]
    return " ".join(t for t in texts if t) or None


def notice(status: HistoryStatus) -> str | None:
    """What to tell the user once at start: the file set aside or read-only, and what was
    restored from an earlier quit's set-aside writes."""
    return " ".join(t for t in (status.store_notice, replay_text(status)) if t) or None
