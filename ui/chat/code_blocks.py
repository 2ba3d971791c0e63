"""Fenced code in a rendered reply: syntax colours (Pygments) and a Copy link per block.

Qt's Markdown reader makes each line of a fenced block a QTextBlock carrying the fence's
language; consecutive such blocks are one code block here."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache

from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.style import StyleMeta
from pygments.styles import get_style_by_name
from pygments.token import _TokenType
from pygments.util import ClassNotFound
from PySide6.QtCore import Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QTextBlock,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
)

COPY_SCHEME = "copy-code"
LINK_COLOUR = QColor("#1a73e8")


@dataclass
class CodeBlock:
    language: str
    text: str
    start: int  # document position of its first character


def is_code(block: QTextBlock) -> bool:
    fmt = block.blockFormat()
    return fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.nonBreakableLines()


def find_code_blocks(doc: QTextDocument) -> list[tuple[str, list[QTextBlock]]]:
    groups: list[tuple[str, list[QTextBlock]]] = []
    block, current = doc.begin(), None
    while block.isValid():
        if is_code(block):
            if current is None:
                lang = block.blockFormat().stringProperty(
                    QTextFormat.Property.BlockCodeLanguage)
                current = (lang.strip().lower(), [])
                groups.append(current)
            current[1].append(block)
        else:
            current = None
        block = block.next()
    return groups


@cache
def _lexer(language: str) -> Lexer:
    try:
        return get_lexer_by_name(language) if language else TextLexer()
    except ClassNotFound:
        return TextLexer()


@lru_cache(maxsize=512)
def _tokens(language: str, text: str) -> tuple[tuple[_TokenType, str], ...]:
    """Lexed once per block text: while a reply streams, its finished blocks are rendered
    again every frame with the same text."""
    return tuple(_lexer(language).get_tokens(text))


@cache
def _format(style_name: str, ttype: _TokenType) -> QTextCharFormat | None:
    style: StyleMeta = get_style_by_name(style_name)
    spec = style.style_for_token(ttype)
    if not (spec["color"] or spec["bold"] or spec["italic"]):
        return None
    fmt = QTextCharFormat()
    if spec["color"]:
        fmt.setForeground(QColor("#" + spec["color"]))
    if spec["bold"]:
        fmt.setFontWeight(QFont.Weight.Bold)
    if spec["italic"]:
        fmt.setFontItalic(True)
    return fmt


def highlight(doc: QTextDocument, style_name: str = "default",
              link_colour: QColor = LINK_COLOUR) -> list[CodeBlock]:
    """Colour every fenced block and put a "Copy code" link above it; returns the blocks
    (the link's href is copy-code:<index>)."""
    found = []
    cursor = QTextCursor(doc)
    for language, blocks in find_code_blocks(doc):
        text = "\n".join(b.text() for b in blocks)
        found.append(CodeBlock(language, text, blocks[0].position()))
    # Backwards: inserting links shifts every position after them.
    for index in range(len(found) - 1, -1, -1):
        code = found[index]
        pos = code.start
        for ttype, value in _tokens(code.language, code.text):
            fmt = _format(style_name, ttype)
            if fmt is not None and value.strip():
                cursor.setPosition(pos)
                cursor.setPosition(pos + len(value), QTextCursor.MoveMode.KeepAnchor)
                cursor.mergeCharFormat(fmt)
            pos += len(value)
        _insert_copy_link(cursor, code, index, link_colour)
    return found


def _insert_copy_link(cursor: QTextCursor, code: CodeBlock, index: int,
                      colour: QColor) -> None:
    cursor.setPosition(code.start)
    cursor.insertBlock()
    cursor.movePosition(QTextCursor.MoveOperation.PreviousBlock)
    plain = QTextBlockFormat()
    plain.setAlignment(Qt.AlignmentFlag.AlignRight)
    plain.setTopMargin(4)
    cursor.setBlockFormat(plain)
    link = QTextCharFormat()
    link.setAnchor(True)
    link.setAnchorHref(f"{COPY_SCHEME}:{index}")
    link.setForeground(colour)
    label = f"{code.language} · Copy code" if code.language else "Copy code"
    cursor.insertText(label, link)
