"""app/events.py: bound-method listeners are held weakly, other callables strongly."""

from __future__ import annotations

import gc
import weakref

from app.conversation import Conversation
from app.events import Event


class View:
    def __init__(self) -> None:
        self.seen: list[object] = []

    def on_event(self, *args: object) -> None:
        self.seen.append(args)


def test_a_view_dropped_without_detaching_is_collected_and_no_longer_called() -> None:
    event = Event()
    view = View()
    event.connect(view.on_event)
    event.emit(1)
    assert view.seen == [(1,)]
    calls = view.seen
    gone = weakref.ref(view)
    del view
    gc.collect()
    assert gone() is None  # the event did not keep it alive
    event.emit(2)  # nothing is called, nothing fails
    assert calls == [(1,)]
    assert event._listeners == []  # and the dead listener is forgotten


def test_plain_functions_are_held_strongly_until_disconnected() -> None:
    event = Event()
    seen: list[int] = []

    def listen(n: int) -> None:
        seen.append(n)

    event.connect(listen)
    event.connect(lambda n: seen.append(n * 10))
    event.connect(seen.append)  # a builtin's bound method: strong too
    gone = weakref.ref(listen)
    del listen
    gc.collect()
    assert gone() is not None
    event.emit(1)
    assert seen == [1, 10, 1]
    event.disconnect(gone())
    event.emit(2)
    assert seen == [1, 10, 1, 20, 2]


def test_a_bound_method_disconnects_and_a_failing_listener_does_not_stop_the_others(
        monkeypatch) -> None:
    event = Event()
    view, other = View(), View()
    event.connect(view.on_event)
    event.connect(view.on_event)  # twice: called twice, disconnected one at a time
    event.connect(lambda: 1 / 0)
    event.connect(other.on_event)
    hooked: list[type] = []
    monkeypatch.setattr("sys.excepthook", lambda kind, *_: hooked.append(kind))
    event.emit()
    assert len(view.seen) == 2 and len(other.seen) == 1 and hooked == [ZeroDivisionError]
    event.disconnect(view.on_event)
    event.emit()
    assert len(view.seen) == 3 and len(other.seen) == 2
    event.disconnect()
    event.emit()
    assert len(view.seen) == 3 and len(other.seen) == 2


class ChatView:
    """A view of a conversation as a tab is one: bound methods only, never detached."""

    def __init__(self, conv: Conversation) -> None:
        self.seen: list[str] = []
        conv.message_added.connect(self.added)
        conv.path_changed.connect(self.path_changed)
        conv.meta_changed.connect(self.meta_changed)

    def added(self, msg: object) -> None:
        self.seen.append("added")

    def path_changed(self) -> None:
        self.seen.append("path")

    def meta_changed(self) -> None:
        self.seen.append("meta")


def test_a_conversation_lets_go_of_a_view_nobody_holds() -> None:
    conv = Conversation(bridge=None, title="t")  # type: ignore[arg-type] - nothing is sent
    view = ChatView(conv)
    conv.rename("renamed")
    assert view.seen == ["meta"]
    seen, gone = view.seen, weakref.ref(view)
    del view
    gc.collect()
    assert gone() is None
    conv.rename("again")
    conv.undo_delete()  # nothing to undo: no event either way
    assert seen == ["meta"]
