"""Real files for the attachment tests (issue #51): PDFs made with reportlab (with a text
layer, scanned-like without one, password-protected with pypdf's writer), a DOCX made with
python-docx, a code folder with .gitignore files."""

from __future__ import annotations

from pathlib import Path


def make_pdf(path: Path, pages: list[str]) -> Path:
    """A PDF whose page i carries the lines of pages[i] as real text."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    for text in pages:
        y = 800
        for line in text.splitlines():
            c.drawString(72, y, line)
            y -= 16
        c.showPage()
    c.save()
    return path


def make_scanned_pdf(path: Path, pages: int = 2) -> Path:
    """A PDF of drawn shapes only, as a scan without OCR: no text layer."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    for i in range(pages):
        c.rect(72, 400, 300 + 10 * i, 200, fill=1)
        c.showPage()
    c.save()
    return path


def make_locked_pdf(path: Path, text: str, password: str = "s3cret") -> Path:
    from pypdf import PdfReader, PdfWriter

    plain = make_pdf(path.with_suffix(".plain.pdf"), [text])
    writer = PdfWriter()
    for page in PdfReader(plain).pages:
        writer.add_page(page)
    writer.encrypt(user_password=password, owner_password=password + "-owner")
    with open(path, "wb") as f:
        writer.write(f)
    plain.unlink()
    return path


def make_docx(path: Path, paragraphs: list[str], table: list[list[str]]) -> Path:
    from docx import Document

    doc = Document()
    for p in paragraphs:
        doc.add_paragraph(p)
    t = doc.add_table(rows=len(table), cols=len(table[0]))
    for r, row in enumerate(table):
        for c, cell in enumerate(row):
            t.cell(r, c).text = cell
    doc.save(str(path))
    return path


def make_code_folder(root: Path) -> Path:
    """src/ with two Python files, an ignored build/ and *.log, a nested .gitignore, a
    binary file, and a .git folder."""
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "build").mkdir()
    (root / ".git").mkdir()
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "src" / "pkg" / ".gitignore").write_text("secret.py\n")
    (root / "src" / "main.py").write_text("def main():\n    return 42\n")
    (root / "src" / "pkg" / "util.py").write_text("WIDGET_LIMIT = 7\n")
    (root / "src" / "pkg" / "secret.py").write_text("TOKEN = 'do not send'\n")
    (root / "build" / "out.py").write_text("GENERATED = True\n")
    (root / "run.log").write_text("log line\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return root
