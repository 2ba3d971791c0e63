"""The window's menus and shortcuts, from one table: each entry's name, text, keys and menu.

The window hands `build` a handler for each name (a function, or a QAction or QMenu that a
dock or the server controls own); an entry without one is left out (History… with no
history). Actions are found by name in what `build` returns, never by their text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu

MENUS = (("chat", "&Chat"), ("view", "&View"), ("server", "&Server"), ("help", "&Help"))


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    text: str = ""
    keys: tuple[str, ...] = ()
    menu: str | None = None  # None: a shortcut with no menu entry
    separator: bool = False  # a line above it


TABLE = (
    Entry("new_tab", "&New tab", ("Ctrl+T",), "chat"),
    Entry("close_tab", "&Close tab", ("Ctrl+W",), "chat"),
    Entry("rename_tab", "&Rename tab…", ("F2",), "chat"),
    Entry("load_model", "&Load model…", ("Ctrl+O",), "chat"),
    Entry("speculative", "Speculati&ve decoding", (), "chat"),
    Entry("connections", "Co&nnections…", ("Ctrl+Shift+K",), "chat"),
    Entry("mcp_servers", "MC&P servers…", (), "chat"),
    Entry("compare", "Co&mpare…", ("Ctrl+Shift+C",), "chat"),
    Entry("reopen_tab", "Re&open closed tab", ("Ctrl+Shift+T",), "chat"),
    # a text field with something to redo keeps Ctrl+Shift+Z (ui/chat/input_box.py)
    Entry("undo_delete", "&Undo delete", ("Ctrl+Shift+Z",), "chat"),
    Entry("history", "&History…", ("Ctrl+H",), "chat"),
    # Ctrl+, as most desktop apps (Cmd+, on macOS, where Qt maps Ctrl to Cmd)
    Entry("preferences", "&Preferences…", ("Ctrl+,",), "chat", separator=True),
    Entry("quit", "&Quit", ("Ctrl+Q",), "chat", separator=True),
    Entry("sidebar", "Conversation side&bar", ("Ctrl+B",), "view"),
    Entry("stats", "Engine &stats", ("Ctrl+Shift+S",), "view"),
    Entry("simulator", "&Load simulator", ("Ctrl+Shift+L",), "view"),
    Entry("theme", "&Theme", (), "view"),
    Entry("api_server", "&API server (OpenAI-compatible)", ("Ctrl+Shift+A",), "server"),
    Entry("server_settings", "Server &settings…", (), "server"),
    Entry("shortcuts", "&Keyboard shortcuts", (), "help"),
    Entry("about", "&About BatchChat", (), "help"),
    Entry("next_tab", keys=("Ctrl+Tab", "Ctrl+PgDown")),
    Entry("previous_tab", keys=("Ctrl+Shift+Backtab", "Ctrl+PgUp")),
    # Ctrl+1…8 pick that tab, Ctrl+9 the last one (as browsers do)
    *(Entry(f"tab_{n}", keys=(f"Ctrl+{n}",)) for n in range(1, 10)),
)

Handler = Callable[[], object] | QAction | QMenu


def build(window: QMainWindow, handlers: Mapping[str, Handler]) -> dict[str, QAction]:
    """The menus and shortcuts of TABLE on `window`; its actions by name."""
    menus = {key: window.menuBar().addMenu(title) for key, title in MENUS}
    actions: dict[str, QAction] = {}
    for entry in TABLE:
        handler = handlers.get(entry.name)
        if handler is None:
            continue
        menu = menus[entry.menu] if entry.menu else None
        if menu is not None and entry.separator:
            menu.addSeparator()
        if isinstance(handler, QMenu):
            handler.setTitle(entry.text)
            if menu is not None:
                menu.addMenu(handler)
            continue
        if isinstance(handler, QAction):
            action = handler
        else:
            action = QAction(window)
            action.triggered.connect(lambda _=False, fn=handler: fn())
        action.setText(entry.text)
        action.setShortcuts([QKeySequence(k) for k in entry.keys])
        if menu is not None:
            menu.addAction(action)
        window.addAction(action)  # its shortcut works with the menu bar hidden too
        actions[entry.name] = action
    return actions
