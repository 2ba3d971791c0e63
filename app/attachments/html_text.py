"""An HTML page's readable text (the standard library's parser: no dependency for this):
script, style and head left out, block elements on lines of their own."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_HIDDEN = {"script", "style", "head", "noscript", "template", "svg"}
_BLOCKS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section",
           "article", "header", "footer", "pre", "blockquote", "table", "ul", "ol", "hr",
           "title", "dt", "dd"}


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HIDDEN:
            self._hidden += 1
        elif tag in _BLOCKS:
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        elif tag in _BLOCKS:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.out.append(data)


def html_to_text(html: str) -> str:
    """The page's text, runs of blank lines and spaces squeezed."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    text = "".join(parser.out)
    text = re.sub(r"[ \t\r\f\v]+", " ", text)
    text = re.sub(r" *\n *", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()
