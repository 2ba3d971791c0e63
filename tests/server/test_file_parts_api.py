"""OpenAI `file` content parts on /v1/chat/completions (issue #51, slice 5), through the
official openai client on loopback: files whole when they fit (usage.prompt_tokens is the
prompt with them), retrieved when they do not (the planted fact's passage in the prompt),
a 400 naming the part for a file that cannot be read, and a follow-up on the same document
served from the prefix cache (cached_tokens)."""

from __future__ import annotations

import base64
import random
from pathlib import Path

import openai
import pytest

from app.attachments import Attachment, read_attachment, user_content
from app.server import schemas
from tests.app.attachment_files import make_docx, make_pdf, make_scanned_pdf
from tests.server.conftest import MODEL

MIME = {".pdf": "application/pdf", ".md": "text/markdown", ".txt": "text/plain",
        ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ".bin": "application/octet-stream"}


def file_part(path: Path, filename: str | None = None) -> dict:
    data = base64.b64encode(path.read_bytes()).decode()
    return {"type": "file", "file": {"filename": filename or path.name,
                                     "file_data": f"data:{MIME[path.suffix]};base64,{data}"}}


def _read(path: Path) -> Attachment:
    att = read_attachment(path)
    assert isinstance(att, Attachment)
    return att


async def test_files_go_in_whole_and_usage_counts_them(serve, tmp_path: Path) -> None:
    s = await serve()
    md = tmp_path / "notes.md"
    md.write_text("# Plan\nShip it.\n")
    pdf = make_pdf(tmp_path / "r.pdf", ["Revenue up"])
    docx = make_docx(tmp_path / "m.docx", ["Ana owns it"], [["a", "b"]])
    question = "Summary?"
    r = await s.client.chat.completions.create(
        model=MODEL, max_tokens=4, temperature=0, messages=[{"role": "user", "content": [
            file_part(md), {"type": "text", "text": question}, file_part(pdf),
            file_part(docx)]}])
    expected = user_content(question, [_read(md), _read(pdf), _read(docx)])
    assert "Ship it." in expected and "Revenue up" in expected and "Ana owns it" in expected
    prompt = s.engine.prompt_tokens([{"role": "user", "content": expected}])
    assert r.usage.prompt_tokens == len(prompt)


async def test_a_document_over_the_context_is_retrieved(serve, tmp_path: Path,
                                                       monkeypatch) -> None:
    import threading

    from app.attachments import index, messages

    # a fresh index cache: another test of this process may have indexed the same text
    monkeypatch.setattr(messages, "_shared", None)
    built_on: list[str] = []  # the index is built off the server's loop
    real_init = index.ChunkIndex.__init__

    def recording(self, chunks, *rest):
        built_on.append(threading.current_thread().name)
        real_init(self, chunks, *rest)

    monkeypatch.setattr(index.ChunkIndex, "__init__", recording)
    s = await serve(engine={"context_length": 2048})
    rng = random.Random(2)
    words = "river stone market ledger harbor lantern vault code gate tower".split()
    lines = [" ".join(rng.choice(words) for _ in range(10)) + "." for _ in range(1500)]
    lines[1100] = "The Osprey vault code is 7719."
    doc = tmp_path / "ledger.txt"
    doc.write_text("\n".join(lines) + "\n")  # ~90 KB: 90,000 byte tokens against 2,048
    body = {"model": MODEL, "max_tokens": 8, "temperature": 0, "messages": [
        {"role": "user", "content": [file_part(doc),
                                     {"type": "text", "text": "What is the Osprey vault code?"}]}]}
    r = await s.client.chat.completions.create(**body)
    assert built_on and threading.current_thread().name not in built_on
    # the same body read and fitted as the server does, to see the prompt it ran
    from app.backend import LocalTarget
    from app.request import attachments

    parsed = schemas.parse_chat(body, 2048)
    req, fitted = attachments.fitted(parsed, LocalTarget(s.engine))
    assert not fitted[0].whole
    content = req.messages[0]["content"]
    assert "The Osprey vault code is 7719." in content
    cite = [c for c in fitted[0].citations if "7719" in c.text][0]
    assert cite.first_line <= 1101 <= cite.last_line
    assert r.usage.prompt_tokens == len(s.engine.prompt_tokens(list(req.messages)))
    assert r.usage.prompt_tokens + 8 <= 2048


async def test_unreadable_files_are_a_400_naming_the_part(serve, tmp_path: Path) -> None:
    s = await serve()
    scan = make_scanned_pdf(tmp_path / "scan.pdf")
    blob = tmp_path / "x.bin"
    blob.write_bytes(bytes(range(256)) * 4)
    text = {"type": "text", "text": "Read it."}
    cases = [
        ([text, file_part(scan)], "messages[0].content[1]", "scanned PDF"),
        ([file_part(blob)], "messages[0].content[0]", "binary"),
        ([{"type": "file", "file": {"filename": "a.txt", "file_data": "not a url"}}],
         "messages[0].content[0].file.file_data", "data URL"),
        ([{"type": "file", "file": {"file_id": "file-abc"}}],
         "messages[0].content[0].file.file_id", "keeps no files"),
    ]
    for content, param, words in cases:
        with pytest.raises(openai.BadRequestError) as e:
            await s.client.chat.completions.create(
                model=MODEL, max_tokens=2, messages=[{"role": "user", "content": content}])
        error = e.value.body
        assert error["param"] == param and error["code"] == "invalid_value", error
        assert words in error["message"], error
    with pytest.raises(openai.BadRequestError) as e:
        await s.client.chat.completions.create(model=MODEL, max_tokens=2, messages=[
            {"role": "system", "content": [file_part(blob)]},
            {"role": "user", "content": "Hi"}])
    assert e.value.body["param"] == "messages[0].content[0]"


async def test_a_follow_up_on_the_same_document_is_cached(serve, tmp_path: Path) -> None:
    s = await serve()
    doc = tmp_path / "notes.txt"
    doc.write_text("Meeting notes.\nThe release is on Friday.\nAna writes the notes.\n" * 3)
    turn1 = [{"role": "user", "content": [file_part(doc), {"type": "text", "text": "When?"}]}]
    first = await s.client.chat.completions.create(model=MODEL, messages=turn1, max_tokens=6,
                                                   temperature=0)
    turn2 = turn1 + [{"role": "assistant", "content": first.choices[0].message.content},
                     {"role": "user", "content": "Who writes the notes?"}]
    second = await s.client.chat.completions.create(model=MODEL, messages=turn2, max_tokens=6,
                                                    temperature=0)
    doc_tokens = len(user_content("", [_read(doc)]).encode())  # byte-level tokenizer
    assert first.usage.prompt_tokens > doc_tokens
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached >= first.usage.prompt_tokens  # the document and the first turn reused
    assert cached < second.usage.prompt_tokens


def test_the_document_describes_file_parts(tmp_path: Path) -> None:
    """A body with file parts is valid by the served document, and a file part in a
    system message or without file_data is not (what the fuzzer generates from)."""
    import jsonschema

    from app.server import openapi

    doc = openapi.document()
    schema = doc["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"][
        "application/json"]["schema"]
    (tmp_path / "a.md").write_text("x")
    ok = {"model": MODEL, "messages": [{"role": "user", "content": [
        file_part(tmp_path / "a.md"), {"type": "text", "text": "q"}]}]}
    jsonschema.validate(ok, schema)
    for bad in ({"role": "system", "content": [file_part(tmp_path / "a.md")]},
                {"role": "user", "content": [{"type": "file", "file": {"filename": "a"}}]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"model": MODEL, "messages": [bad]}, schema)
