"""Chat with files in the window (issue #51, slice 4), offscreen with pytest-qt on the tiny
model: the paperclip, a drop and a paste attach files as chips (name, size, the model's
token count), refused files show why and nothing typed is lost, the token count includes
the files, Send puts them in the prompt and shows them on the message, and a reply's
sources open their passage."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, Qt, QUrl
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFileDialog

from app.attachments import Attachment, user_content
from app.attachments.fit import Citation
from app.attachments.framing import frame
from app.attachments.read import size_text
from tests.app.attachment_files import make_code_folder, make_docx, make_pdf, make_scanned_pdf
from tests.ui.conftest import run_until


def _tokenizer(window):
    return window.ctx.bridge.local.engine.tokenizer


def _reference(window, messages) -> int:
    tok = _tokenizer(window)
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return len(tok.encode(text, add_special_tokens=False))


def _files(tmp_path: Path) -> dict[str, Path]:
    notes = tmp_path / "notes.md"
    notes.write_text("# Plan\nShip the widget on Friday.\n")
    blob = tmp_path / "data.bin"  # not an image's suffix (a .jpg goes to the image chips)
    blob.write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(300))
    return {"md": notes, "pdf": make_pdf(tmp_path / "report.pdf", ["Revenue grew 12%."]),
            "docx": make_docx(tmp_path / "minutes.docx", ["Ana owns it"], [["a", "b"]]),
            "folder": make_code_folder(tmp_path / "proj"),
            "scan": make_scanned_pdf(tmp_path / "scan.pdf"), "binary": blob,
            "missing": tmp_path / "gone.txt"}


def _settled(loop, tab) -> None:
    run_until(loop, lambda: not tab.chips.reading and all(
        c.tokens is not None for c in tab.chips.chips if isinstance(c.item, Attachment)))


def test_files_become_chips_counted_and_sent(window, loop, qtbot, tmp_path, monkeypatch):
    tab = window.current_tab()
    files = _files(tmp_path)
    qtbot.keyClicks(tab.input, "What is in these?")
    # the paperclip: a file dialog (stood in for) picks three files
    picked = [str(files["md"]), str(files["pdf"]), str(files["scan"])]
    monkeypatch.setattr(QFileDialog, "getOpenFileNames",
                        staticmethod(lambda *a, **k: (picked, "")))
    qtbot.mouseClick(tab.attach_button, Qt.MouseButton.LeftButton)
    # a drop and a paste (local file URLs) attach, they do not type
    drop = QMimeData()
    drop.setUrls([QUrl.fromLocalFile(str(files["docx"])), QUrl.fromLocalFile(str(files["binary"]))])
    tab.input.insertFromMimeData(drop)
    paste = QMimeData()
    paste.setUrls([QUrl.fromLocalFile(str(files["folder"])),
                   QUrl.fromLocalFile(str(files["missing"]))])
    QGuiApplication.clipboard().setMimeData(paste)
    tab.input.setFocus()
    qtbot.keyClick(tab.input, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    _settled(loop, tab)
    assert tab.input.toPlainText() == "What is in these?"  # nothing typed was lost
    chips = {c.path.name: c for c in tab.chips.chips}
    assert set(chips) == {"notes.md", "report.pdf", "scan.pdf", "minutes.docx", "data.bin",
                          "proj", "gone.txt"}
    tok = _tokenizer(window)
    for name in ("notes.md", "report.pdf", "minutes.docx", "proj"):
        chip = chips[name]
        att = chip.item
        expected = len(tok.encode(frame(att)))
        assert chip.tokens == expected
        assert chip.label.text().startswith(name)
        assert size_text(att.size) in chip.label.text()
        assert f"{expected:,} tokens" in chip.label.text()
        assert chip.property("refused") == "false"
    for name, words in (("scan.pdf", "scanned PDF"), ("data.bin", "binary"),
                        ("gone.txt", "not found")):
        chip = chips[name]
        assert chip.property("refused") == "true" and words in chip.toolTip(), name
        assert chip.label.text().startswith(f"{name} — ")  # cut to fit, the reason in full above
    readable = tab.chips.attachments()
    assert [a.name for a in readable] == ["notes.md", "report.pdf", "minutes.docx", "proj"]

    # the token count is the prompt with the files in it
    count = tab.token_count
    run_until(loop, lambda: count.current and count.size is not None)
    messages = tab.conversation.next_prompt("What is in these?")  # the tab's system prompt
    messages[-1]["content"] = user_content("What is in these?", readable)
    counted = count.size.tokens
    assert counted == _reference(window, messages)
    assert count.size.tokens > _reference(window, tab.conversation.next_prompt("What is in these?"))

    # a refused chip's × removes it; the others stay
    qtbot.mouseClick(chips["data.bin"].remove_button, Qt.MouseButton.LeftButton)
    assert "data.bin" not in {c.path.name for c in tab.chips.chips}

    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    run_until(loop, lambda: not tab.conversation.is_busy and len(tab.conversation.messages) == 2)
    sent = tab.conversation.messages[0]
    assert sent.attachments == tuple(readable)
    assert tab.conversation.messages[1].stats.prompt_tokens == counted  # the engine agrees
    assert not tab.chips.chips and not tab.chips.isVisible()
    shown = tab.messages.widgets[0].files
    assert shown.isVisible() and "report.pdf" in shown.text() and "proj" in shown.text()


def test_a_replys_sources_open_their_passage(window, loop, qtbot):
    tab = window.current_tab()
    qtbot.keyClicks(tab.input, "hi")
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    run_until(loop, lambda: not tab.conversation.is_busy and len(tab.conversation.messages) == 2)
    reply = tab.conversation.messages[1]
    reply.citations = (Citation(1, "ledger.txt", 690, 712, None, None, "The vault code is 7719."),
                       Citation(2, "report.pdf", 3, 9, 17, None, "Budget approved."))
    widget = tab.messages.widgets[1]
    widget.refresh()
    sources = widget.sources
    assert sources.isVisible()
    assert "[1] ledger.txt, lines 690-712" in sources.text()
    assert "[2] report.pdf, page 17, lines 3-9" in sources.text()
    assert 'color: #1a73e8' in sources.text()
    window.set_theme("dark")  # the link keeps a readable blue in the dark look
    run_until(loop, lambda: 'color: #8ab4f8' in sources.text())
    window.set_theme("light")
    opened = []
    sources.opened.connect(opened.append)
    sources.linkActivated.emit("2")
    assert opened == [reply.citations[1]]
    assert sources.dialog.text.toPlainText() == "Budget approved."
    assert "page 17" in sources.dialog.windowTitle()
    sources.dialog.close()
    assert not tab.messages.widgets[0].sources.isVisible()  # the question has none



def test_a_file_too_long_for_the_context_is_indexed_off_the_ui_thread(window, loop, tmp_path,
                                                                       monkeypatch):
    import threading

    from app.attachments import index
    from app.attachments.messages import shared_cache

    built_on: list[str] = []
    real_init = index.ChunkIndex.__init__

    def recording(self, chunks, *rest):
        built_on.append(threading.current_thread().name)
        real_init(self, chunks, *rest)

    monkeypatch.setattr(index.ChunkIndex, "__init__", recording)
    tab = window.current_tab()
    big = tmp_path / "big.txt"  # 12,000 byte tokens against the 8,192-token context
    big.write_text("\n".join(f"line {i} of the long ledger, nothing to see" for i in range(300)))
    tab.attach_files([str(big)])
    assert tab.chips.reading
    _settled(loop, tab)
    chip = tab.chips.chips[0]
    assert chip.tokens > 8192 and "counting" not in chip.label.text()
    assert len(built_on) == 1 and built_on[0] != threading.current_thread().name
    cache = shared_cache()
    before = cache.built
    qtbot_text = "Which line mentions the ledger?"
    tab.input.setPlainText(qtbot_text)
    assert tab.send_text(qtbot_text)
    run_until(loop, lambda: not tab.conversation.is_busy and len(tab.conversation.messages) == 2)
    assert cache.built == before  # the send found the index built
    assert tab.conversation.messages[1].citations


def test_the_paperclips_menu_attaches_a_folder(window, loop, tmp_path, monkeypatch):
    tab = window.current_tab()
    folder = make_code_folder(tmp_path / "proj")
    monkeypatch.setattr(QFileDialog, "getExistingDirectory",
                        staticmethod(lambda *a, **k: str(folder)))
    actions = {a.text(): a for a in tab.attach_button.menu().actions()}
    actions["Folder…"].trigger()
    _settled(loop, tab)
    [chip] = tab.chips.chips
    assert chip.item.kind == "folder" and "2 files" in chip.label.text()
    assert [p.source for p in chip.item.parts] == ["src/main.py", "src/pkg/util.py"]


def test_files_alone_are_sent_with_the_default_question(window, loop, qtbot, tmp_path):
    """Enter with an empty box and a file attached sends the file alone: the message asks
    FILES_ONLY_QUESTION about it; an empty box with no file sends nothing."""
    from app.attachments.framing import FILES_ONLY_QUESTION

    tab = window.current_tab()
    before = len(tab.conversation.messages)
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)  # nothing typed, nothing attached
    assert len(tab.conversation.messages) == before
    notes = tmp_path / "notes.md"
    notes.write_text("# Plan\nShip the widget on Friday.\n")
    tab.attach_files([str(notes)])
    _settled(loop, tab)
    tab.input.setFocus()
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    run_until(loop, lambda: not tab.conversation.is_busy)
    user = tab.conversation.messages[before]
    assert user.role == "user" and user.content == FILES_ONLY_QUESTION
    assert [a.name for a in user.attachments] == ["notes.md"]
    assert not tab.chips.chips  # sent: the chips go
    # the prompt held the file and the question (the tab's system prompt before them)
    messages = [m for m in tab.conversation.next_prompt("x")[:-1] if m["role"] == "system"]
    messages.append({"role": "user", "content": user_content(FILES_ONLY_QUESTION,
                                                             list(user.attachments))})
    assert tab.conversation.messages[-1].stats.prompt_tokens == _reference(window, messages)
