"""A message's rendered Markdown, with each top-level fenced code block in a view of its
own that scrolls sideways: a long code line never wraps, and scrolling it moves only the
code, while the prose around it wraps to the chat's width.

The text is split at fences that start a line (``` or ~~~, not indented); a fence inside a
list item or a quote stays in its prose and wraps there. Each piece is a MarkdownView; a
new render re-renders only the pieces whose text changed (a streaming reply's last one)."""

from __future__ import annotations

import re

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QSizePolicy, QVBoxLayout, QWidget

from .code_blocks import CodeBlock
from .markdown_view import MarkdownView

_OPEN = re.compile(r"(`{3,}|~{3,})")


def split_fences(text: str) -> list[tuple[bool, str]]:
    """`text` as (is_code, piece) in order: fenced blocks that start at a line's first
    column (fences included; one left open runs to the end) and the prose between them."""
    pieces: list[tuple[bool, str]] = []
    prose: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opener = _OPEN.match(lines[i])
        if opener is None or (opener.group(1)[0] == "`" and "`" in lines[i][opener.end():]):
            prose.append(lines[i])
            i += 1
            continue
        fence = opener.group(1)
        end = i + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        if "\n".join(prose).strip():
            pieces.append((False, "\n".join(prose)))
        prose = []
        pieces.append((True, "\n".join(lines[i:end + 1])))
        i = end + 1
    if "\n".join(prose).strip() or not pieces:
        pieces.append((False, "\n".join(prose)))
    return pieces


def _closes(line: str, fence: str) -> bool:
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return False
    run = len(stripped) - len(stripped.lstrip(fence[0]))
    return run >= len(fence) and not stripped[run:].strip()


class ReplyBody(QWidget):
    """Stands where one MarkdownView stood: `set_markdown`, `source_text`, `num_renders`,
    `rerender`, `code_blocks`, `copy_code`, `toPlainText` and `copied(what)`."""

    copied = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(0)
        self.parts: list[MarkdownView] = []
        self.source_text = ""
        self.num_renders = 0

    def set_markdown(self, text: str) -> None:
        if text == self.source_text:
            return
        self.source_text = text
        self.num_renders += 1
        pieces = split_fences(text)
        for i, (code, piece) in enumerate(pieces):
            if i < len(self.parts) and self.parts[i].code_scrolls != code:
                self._drop(i)  # a piece changed kind (a fence was typed): a new view
            if i >= len(self.parts):
                view = MarkdownView(self, code_scrolls=code)
                view.copied.connect(self.copied)
                self.parts.insert(i, view)
                self._layout.insertWidget(i, view)
            self.parts[i].set_markdown(piece)
        while len(self.parts) > len(pieces):
            self._drop(len(self.parts) - 1)

    def _drop(self, index: int) -> None:
        view = self.parts.pop(index)
        self._layout.removeWidget(view)
        view.hide()
        view.deleteLater()

    def rerender(self) -> None:
        """Render the same text again (the look changed)."""
        for view in self.parts:
            view.rerender()

    @property
    def code_blocks(self) -> list[CodeBlock]:
        return [c for view in self.parts for c in view.code_blocks]

    def code_view(self, index: int) -> tuple[MarkdownView, int]:
        """The view holding code block `index`, and its index there."""
        for view in self.parts:
            if index < len(view.code_blocks):
                return view, index
            index -= len(view.code_blocks)
        raise IndexError("no such code block")

    def copy_code(self, index: int) -> str:
        view, local = self.code_view(index)
        return view.copy_code(local)

    def toPlainText(self) -> str:  # noqa: N802 - as QTextEdit's, which it stands in for
        return "\n".join(view.toPlainText() for view in self.parts)
