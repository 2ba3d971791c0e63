"""Issue #51: a chat completion whose files did not fit whole lists the passages it was given
in `citations` (index = the [n] the prompt numbered them by, file, page, line range, text),
whole and streamed (on the chunk that ends the choice), and the OpenAPI document describes
the field; files that fit whole give none. Through the official `openai` client."""

from __future__ import annotations

import random
from pathlib import Path

from tests.server.conftest import MODEL
from tests.server.test_file_parts_api import file_part

QUESTION = {"type": "text", "text": "What is the Osprey vault code?"}


def ledger(tmp_path: Path) -> Path:
    rng = random.Random(2)
    words = "river stone market ledger harbor lantern vault code gate tower".split()
    lines = [" ".join(rng.choice(words) for _ in range(10)) + "." for _ in range(1500)]
    lines[1100] = "The Osprey vault code is 7719."
    doc = tmp_path / "ledger.txt"
    doc.write_text("\n".join(lines) + "\n")  # ~90 KB of byte tokens against 2,048
    return doc


async def test_retrieved_passages_are_listed_whole_and_streamed(serve, tmp_path) -> None:
    s = await serve(engine={"context_length": 2048})
    body = {"model": MODEL, "max_tokens": 6, "temperature": 0, "messages": [
        {"role": "user", "content": [file_part(ledger(tmp_path)), QUESTION]}]}
    raw = await s.client.chat.completions.with_raw_response.create(**body)
    whole = raw.http_response.json()
    citations = whole["citations"]
    assert [c["index"] for c in citations] == list(range(1, len(citations) + 1))
    [fact] = [c for c in citations if "The Osprey vault code is 7719." in c["text"]]
    assert fact["file"] == "ledger.txt" and fact["page"] is None
    assert fact["first_line"] <= 1101 <= fact["last_line"]

    stream = await s.client.chat.completions.create(**body, stream=True)
    listed = []
    async for chunk in stream:
        extra = chunk.model_extra or {}
        if "citations" in extra:
            assert chunk.choices[0].finish_reason is not None  # with the choice's end
            listed.append(extra["citations"])
    assert listed == [citations]  # once, the same passages


async def test_files_that_fit_whole_give_no_citations(serve, tmp_path) -> None:
    s = await serve()
    note = tmp_path / "notes.md"
    note.write_text("# Plan\nThe Osprey vault code is 7719.\n")
    raw = await s.client.chat.completions.with_raw_response.create(
        model=MODEL, max_tokens=2, messages=[{"role": "user",
                                              "content": [file_part(note), QUESTION]}])
    assert "citations" not in raw.http_response.json()


def test_the_document_describes_citations() -> None:
    import jsonschema
    import pytest

    from app.server import openapi

    response = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"},
                             "logprobs": None, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2,
                          "prompt_tokens_details": {"cached_tokens": 0},
                          "completion_tokens_details": {"accepted_prediction_tokens": 0,
                                                        "rejected_prediction_tokens": 0,
                                                        "reasoning_tokens": 0}},
                "citations": [{"index": 1, "file": "a.txt", "source": None, "page": None,
                               "first_line": 3, "last_line": 9, "text": "t"}]}
    jsonschema.validate(response, openapi.CHAT_COMPLETION)
    del response["citations"][0]["text"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(response, openapi.CHAT_COMPLETION)


async def test_a_message_of_files_alone(serve, tmp_path) -> None:
    """File parts and no text: a file that fits goes in alone; one that does not gives its
    first passages, listed from line 1."""
    from app.attachments import read_attachment, user_content

    s = await serve(engine={"context_length": 2048})
    note = tmp_path / "notes.md"
    note.write_text("# Plan\nShip it on Friday.\n")
    r = await s.client.chat.completions.create(
        model=MODEL, max_tokens=2, messages=[{"role": "user", "content": [file_part(note)]}])
    alone = user_content("", [read_attachment(note)])
    assert r.usage.prompt_tokens == len(s.engine.prompt_tokens(
        [{"role": "user", "content": alone}]))
    raw = await s.client.chat.completions.with_raw_response.create(
        model=MODEL, max_tokens=2,
        messages=[{"role": "user", "content": [file_part(ledger(tmp_path))]}])
    assert raw.http_response.json()["citations"][0]["first_line"] == 1
