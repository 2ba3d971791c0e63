"""An attachment cut into chunks that know where they are: the file, a PDF's page or a
folder's file, and the line range (1-based, inclusive) inside that page or file. Chunks
end on line ends (a line longer than a chunk is cut where it must, keeping its number),
so a citation points at whole lines."""

from __future__ import annotations

from dataclasses import dataclass

from .attachment import Attachment, Part

CHUNK_CHARS = 1200  # about 300 tokens of English: a passage, small enough to pick several


@dataclass(frozen=True, slots=True)
class Chunk:
    file: str  # the attachment's name
    text: str
    first_line: int
    last_line: int
    page: int | None = None
    source: str | None = None  # a folder's file, its path under the folder

    def where(self) -> str:
        """'report.pdf, page 3, lines 4-9' / 'src/a.py in proj, lines 1-30'."""
        name = f"{self.source} in {self.file}" if self.source else self.file
        page = f", page {self.page}" if self.page is not None else ""
        lines = (f"line {self.first_line}" if self.first_line == self.last_line
                 else f"lines {self.first_line}-{self.last_line}")
        return f"{name}{page}, {lines}"


def _part_chunks(file: str, part: Part, size: int) -> list[Chunk]:
    out: list[Chunk] = []
    buf: list[str] = []
    start = 1
    length = 0

    def flush(last: int) -> None:
        nonlocal buf, length
        if buf and "".join(buf).strip():
            out.append(Chunk(file, "".join(buf).rstrip("\n"), start, last, part.page,
                             part.source))
        buf, length = [], 0

    for number, line in enumerate(part.text.splitlines(keepends=True), start=1):
        if length and length + len(line) > size:
            flush(number - 1)
            start = number
        while len(line) > size:  # one long line (a PDF paragraph, minified code)
            buf.append(line[:size])
            length += size
            flush(number)
            start = number
            line = line[size:]
        buf.append(line)
        length += len(line)
    flush(max(start, len(part.text.splitlines()) or 1))
    return out


def chunk_attachment(att: Attachment, size: int = CHUNK_CHARS) -> list[Chunk]:
    """The attachment's chunks in document order."""
    return [c for part in att.parts for c in _part_chunks(att.name, part, size)]
