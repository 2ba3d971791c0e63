"""Files read into text for a chat (issue #51, slice 1), Qt-free: real PDF, DOCX, Markdown,
HTML, CSV, a code folder with .gitignore files; the refusals with their reasons; the
framing in the prompt and the token count on a real tokenizer (byte-level: one token a
byte, so the count is checked exactly)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.attachments import Attachment, RefusalReason, Refused, read_attachment, user_content
from app.attachments.attachment import token_count
from app.attachments.framing import frame
from tests.app.attachment_files import (
    make_code_folder,
    make_docx,
    make_locked_pdf,
    make_pdf,
    make_scanned_pdf,
)
from tests.tiny_model import make_tokenizer


def _read(path: Path, **kw) -> Attachment:
    att = read_attachment(path, **kw)
    assert isinstance(att, Attachment), att
    return att


def test_pdf_text_layer_by_page(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "report.pdf",
                   ["Quarterly report", "Revenue grew 12 percent.\nCosts fell.", "The end"])
    att = _read(pdf)
    assert att.kind == "pdf" and att.name == "report.pdf"
    assert att.size == pdf.stat().st_size
    assert [p.page for p in att.parts] == [1, 2, 3]
    assert "Revenue grew 12 percent." in att.parts[1].text
    assert "Costs fell." in att.text


def test_docx_paragraphs_and_table(tmp_path: Path) -> None:
    docx = make_docx(tmp_path / "minutes.docx", ["Meeting minutes", "Decision: ship on Friday"],
                     [["Owner", "Task"], ["Ana", "release notes"]])
    att = _read(docx)
    assert att.kind == "docx"
    assert att.text.splitlines() == ["Meeting minutes", "Decision: ship on Friday",
                                     "Owner\tTask", "Ana\trelease notes"]


def test_markdown_csv_json_html(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("# Notes\n\n- one\n- two\n")
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "conf.json").write_text('{"k": 1}')
    (tmp_path / "page.html").write_text(
        "<html><head><title>T</title><style>p{}</style></head><body><h1>Hello</h1>"
        "<p>First &amp; second</p><script>alert(1)</script><p>Last</p></body></html>")
    assert _read(tmp_path / "notes.md").kind == "markdown"
    assert _read(tmp_path / "data.csv").text == "a,b\n1,2\n"
    assert _read(tmp_path / "conf.json").kind == "json"
    html = _read(tmp_path / "page.html")
    assert html.text == "Hello\n\nFirst & second\n\nLast"


def test_encodings_detected(tmp_path: Path) -> None:
    fr = ("Le comité a décidé que la réunion de février aura lieu à Genève. Les élèves "
          "étudient le français et la géographie. Où est la bibliothèque? Ça dépend du "
          "théâtre.\n") * 5
    ru = "Привет, мир! Это проверка кодировки текста на русском языке.\n" * 5
    ja = "日本語のテキストファイルです。文字コードの判定を確認します。\n" * 5
    files = {"fr.txt": fr.encode("cp1252"), "ru.txt": ru.encode("cp1251"),
             "ja.txt": ja.encode("shift_jis"), "utf16.txt": fr.encode("utf-16"),
             "bom.txt": b"\xef\xbb\xbf" + ru.encode("utf-8")}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    for name, text in [("fr.txt", fr), ("ru.txt", ru), ("ja.txt", ja), ("utf16.txt", fr),
                       ("bom.txt", ru)]:
        assert _read(tmp_path / name).text == text, name


def test_code_folder_respects_gitignore(tmp_path: Path) -> None:
    root = make_code_folder(tmp_path / "proj")
    att = _read(root)
    assert att.kind == "folder"
    assert [p.source for p in att.parts] == ["src/main.py", "src/pkg/util.py"]
    # build/ (a directory rule), run.log, secret.py (a nested .gitignore), logo.png (binary)
    # and the two .gitignore files; .git is never walked
    assert att.skipped == 5
    framed = frame(att)
    assert framed.startswith("Folder: proj (2 files)\n\nFile: proj/src/main.py\n```python\n")
    assert "do not send" not in framed and "GENERATED" not in framed


def test_refusals_with_reasons(tmp_path: Path) -> None:
    scanned = make_scanned_pdf(tmp_path / "scan.pdf")
    locked = make_locked_pdf(tmp_path / "locked.pdf", "hidden text")
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(500))
    (tmp_path / "big.txt").write_text("x" * 5000)
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.7\nthis is not a pdf body")
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not a zip at all")
    (tmp_path / "empty").mkdir()
    cases = {
        scanned: RefusalReason.NO_TEXT, locked: RefusalReason.ENCRYPTED,
        tmp_path / "photo.jpg": RefusalReason.BINARY, tmp_path / "gone.md": RefusalReason.MISSING,
        tmp_path / "broken.pdf": RefusalReason.UNREADABLE,
        tmp_path / "broken.docx": RefusalReason.UNREADABLE,
        tmp_path / "empty": RefusalReason.NO_TEXT,
    }
    for path, reason in cases.items():
        got = read_attachment(path)
        assert isinstance(got, Refused), (path, got)
        assert got.reason == reason, (path, got)
        assert got.name == path.name and got.message
    big = read_attachment(tmp_path / "big.txt", max_bytes=4096)
    assert isinstance(big, Refused) and big.reason == RefusalReason.TOO_LARGE
    assert big.message == "4.9 KB is over the 4.0 KB limit"
    assert "scanned PDF" in read_attachment(scanned).message  # type: ignore[union-attr]


def test_pdf_with_empty_password_opens(tmp_path: Path) -> None:
    """Many PDFs are encrypted with an empty user password: anyone can open them."""
    pdf = make_locked_pdf(tmp_path / "open.pdf", "readable by all", password="")
    assert "readable by all" in _read(pdf).text


def test_framing_is_stable_and_fenced(tmp_path: Path) -> None:
    md = tmp_path / "doc.md"
    md.write_text("Intro\n```python\nx = 1\n```\n")
    att = _read(md)
    assert frame(att) == "File: doc.md\n````markdown\nIntro\n```python\nx = 1\n```\n````"
    assert frame(_read(md)) == frame(att)  # the same bytes frame the same way: KV reused
    assert user_content("What is x?", [att]) == frame(att) + "\n\nWhat is x?"
    assert user_content("plain", []) == "plain"


def test_attachments_in_the_prompt_with_the_token_count(tmp_path: Path) -> None:
    """A Markdown file, a code folder, a real PDF and a DOCX in one message: their text is
    in the rendered prompt and the count is the prompt's own."""
    tok = make_tokenizer()
    (tmp_path / "notes.md").write_text("# Plan\nShip the widget.\n")
    atts = [_read(tmp_path / "notes.md"), _read(make_code_folder(tmp_path / "proj")),
            _read(make_pdf(tmp_path / "r.pdf", ["Page one fact", "Page two fact"])),
            _read(make_docx(tmp_path / "m.docx", ["Docx fact"], [["a", "b"]]))]
    question = "Summarise these."
    content = user_content(question, atts)
    prompt = tok.apply_chat_template([{"role": "user", "content": content}],
                                     add_generation_prompt=True, tokenize=False)
    for needle in ("Ship the widget.", "WIDGET_LIMIT = 7", "Page one fact", "Page two fact",
                   "Docx fact", "a\tb", question):
        assert needle in prompt
    ids = tok.apply_chat_template([{"role": "user", "content": content}],
                                  add_generation_prompt=True)
    empty = tok.apply_chat_template([{"role": "user", "content": question}],
                                    add_generation_prompt=True)
    # byte-level BPE without merges: the attachments' tokens, plus their two-newline
    # separators, are exactly what they add to the prompt
    separators = len(tok.encode("\n\n", add_special_tokens=False)) * len(atts)
    added = token_count(atts, lambda t: tok.encode(t, add_special_tokens=False))
    assert len(ids) - len(empty) == added + separators
    assert added == sum(len(frame(a).encode("utf-8")) for a in atts)


@pytest.mark.parametrize("name", ["a.py", "Makefile", "x.unknownext"])
def test_code_and_unknown_text_files(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text("all: build\n")
    assert _read(tmp_path / name).text == "all: build\n"


def test_a_2_gb_file_is_refused_before_reading(tmp_path: Path) -> None:
    huge = tmp_path / "dump.txt"
    with open(huge, "wb") as f:  # sparse: 2 GiB on paper, no disk used
        f.truncate(2 * 1024 ** 3)
    got = read_attachment(huge)
    assert isinstance(got, Refused) and got.reason == RefusalReason.TOO_LARGE
    assert got.message == "2.0 GB is over the 64.0 MB limit"
