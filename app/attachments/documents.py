"""PDF and DOCX files to text parts. pypdf (pure Python, BSD, the maintained successor of
PyPDF2) reads a PDF's text layer page by page, so a chunk can cite its page; python-docx
reads a DOCX's paragraphs and tables in document order. Both raise DocumentRefused with
the reason a chip shows."""

from __future__ import annotations

from pathlib import Path
from zipfile import BadZipFile

from .attachment import Part, RefusalReason


class DocumentRefused(Exception):
    def __init__(self, reason: RefusalReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def pdf_parts(path: Path) -> tuple[Part, ...]:
    """One part per page that has text (1-based page numbers)."""
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            # many PDFs are encrypted with an empty user password and open for anyone;
            # the rest need a password this app does not ask for
            raise DocumentRefused(RefusalReason.ENCRYPTED,
                                  "password-protected PDF: open it, save an unprotected copy")
        pages = [(i + 1, (page.extract_text() or "").strip())
                 for i, page in enumerate(reader.pages)]
    except FileNotDecryptedError as e:
        raise DocumentRefused(RefusalReason.ENCRYPTED,
                              "password-protected PDF: open it, save an unprotected copy") from e
    except DocumentRefused:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as e:
        raise DocumentRefused(RefusalReason.UNREADABLE, f"damaged PDF: {e}") from e
    parts = tuple(Part(text, page=n) for n, text in pages if text)
    if not parts:
        raise DocumentRefused(RefusalReason.NO_TEXT,
                              f"no text layer in {len(pages)} page(s): a scanned PDF "
                              "needs OCR first")
    return parts


def docx_parts(path: Path) -> tuple[Part, ...]:
    """The document's paragraphs and table rows (cells tab-separated), in order, as one
    part (a DOCX has no stored page breaks to cite)."""
    from docx import Document
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        doc = Document(str(path))
        lines: list[str] = []
        for block in doc.iter_inner_content():
            if isinstance(block, Paragraph):
                lines.append(block.text)
            elif isinstance(block, Table):
                lines.extend("\t".join(c.text for c in row.cells) for row in block.rows)
    except (PackageNotFoundError, BadZipFile, KeyError, ValueError, OSError) as e:
        raise DocumentRefused(RefusalReason.UNREADABLE, f"damaged DOCX: {e}") from e
    text = "\n".join(lines).strip()
    if not text:
        raise DocumentRefused(RefusalReason.NO_TEXT, "the document has no text")
    return (Part(text),)
