"""Help → Keyboard shortcuts and About BatchChat."""

from __future__ import annotations

from html import escape

from PySide6.QtWidgets import QMessageBox, QWidget

from app.about import about_facts
from app.bridge import EngineBridge

SHORTCUTS = (
    ("Ctrl+T / Ctrl+W", "new tab / close tab"),
    ("Ctrl+Shift+T", "reopen the last closed tab, where it was"),
    ("Ctrl+Tab / Ctrl+Shift+Tab", "next / previous tab"),
    ("Ctrl+PgDown / Ctrl+PgUp", "next / previous tab"),
    ("Ctrl+1 … Ctrl+8, Ctrl+9", "go to that tab, the last tab"),
    ("F2", "rename the tab"),
    ("Enter / Shift+Enter", "send / new line"),
    ("Esc", "stop the reply (or cancel an edit)"),
    ("Ctrl+R", "regenerate the last reply (the old one stays as a version)"),
    ("Ctrl+Shift+Z", "undo a delete"),
    ("Ctrl+H", "history"),
    ("Ctrl+B", "show / hide the conversation sidebar"),
    ("Enter / F2 / Delete", "in the sidebar: open / rename / delete the chat"),
    ("Ctrl+O", "load a model"),
    ("Ctrl+Shift+K", "connections to OpenAI-compatible servers"),
    ("Ctrl+,", "preferences: the defaults for new tabs"),
    ("Ctrl+Shift+C", "compare: one message to several presets or connections"),
    ("Ctrl+Shift+S", "engine stats: to the front (closed if in front)"),
    ("Ctrl+Shift+L", "load simulator: to the front (closed if in front)"),
    ("Ctrl+Shift+A", "API server (OpenAI-compatible): start / stop"),
    ("Ctrl+Q", "quit"),
)


def _table(rows: tuple[tuple[str, str], ...] | list[tuple[str, str]]) -> str:
    cells = "".join(f"<tr><td><b>{escape(k)}</b>&nbsp;&nbsp;</td><td>{escape(v)}</td></tr>"
                    for k, v in rows)
    return f"<table cellpadding='2'>{cells}</table>"


def shortcuts_box(parent: QWidget) -> QMessageBox:
    box = QMessageBox(QMessageBox.Icon.NoIcon, "Keyboard shortcuts", _table(SHORTCUTS),
                      QMessageBox.StandardButton.Close, parent)
    box.setObjectName("shortcutsBox")
    box.open()  # never exec(): qasync runs this loop
    return box


def about_box(parent: QWidget, bridge: EngineBridge) -> QMessageBox:
    text = ("<h3>BatchChat</h3><p>Local multi-session chat on one continuous-batching "
            "engine.</p>" + _table(about_facts(bridge)))
    box = QMessageBox(QMessageBox.Icon.NoIcon, "About BatchChat", text,
                      QMessageBox.StandardButton.Close, parent)
    box.setObjectName("aboutBox")
    box.open()
    return box
