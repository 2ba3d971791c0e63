"""Views of a Conversation never detach from it by hand: its events hold their bound methods
weakly (app/events.py), so a chat tab or a compare view that goes away is collected and no
longer called, while the chat (kept for Reopen, or shown by another tab) lives on."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication, QWidget

from app.conversation import ChatMessage, Conversation
from ui.chat.chat_tab import ChatTab
from ui.compare.dialog import CompareDialog

from .conftest import FAST


def delete_now(widget: QWidget) -> weakref.ref[QWidget]:
    gone = weakref.ref(widget)
    widget.deleteLater()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    return gone


def test_a_tab_dropped_without_detaching_is_collected_and_no_longer_called(
        ctx: Any, loop: Any) -> None:
    conv = Conversation(ctx.bridge, title="kept", params=dict(FAST),
                        messages=[ChatMessage("user", "hi"), ChatMessage("assistant", "hello")])
    tab = ChatTab(ctx, conversation=conv)
    assert len(tab.messages.widgets) == 2  # it shows the chat
    tab.detach()  # the settings outlive it (its own listeners there: not the chat's)
    gone = delete_now(tab)
    del tab
    gc.collect()
    assert gone() is None
    # the chat's events still fire, and nothing calls the tab's deleted widgets (a call
    # would raise RuntimeError into sys.excepthook, which pytest-qt turns into a failure)
    conv.rename("renamed")
    conv.switch_version(1, 0)
    assert conv.delete(1) and conv.undo_delete()
    conv.notice.emit("nobody hears this")


def test_a_compare_view_goes_with_its_tab_without_detaching(ctx: Any, loop: Any) -> None:
    conv = Conversation(ctx.bridge, title="kept", params=dict(FAST))
    tab = ChatTab(ctx, conversation=conv)
    dialog = CompareDialog(conv, ctx.settings, "", tab)
    view = weakref.ref(dialog)
    del dialog
    tab.detach()
    delete_now(tab)
    del tab
    gc.collect()
    assert view() is None
    conv.busy_changed.emit(False)  # what the view listened to: nobody is left to call
    conv.message_finished.emit(ChatMessage("assistant", "late"))
