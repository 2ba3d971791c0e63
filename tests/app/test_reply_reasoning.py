"""Issue #49 (E): a tab's reply of a reasoning model, split at each frame
(app/reasoning/reply.py): the message's thinking and answer from its stream's text, a tag
still arriving held back until the end, the thinking's time and tokens taken while it
thinks; a model that does not think keeps the stream's very string."""

from __future__ import annotations

from types import SimpleNamespace

from app.message_tree import ChatMessage
from app.reasoning.reply import take_text, thinking_live
from app.request.reasoning import Shape
from engine.public import ReasoningStyle

TAGS = Shape(ReasoningStyle("tags", "<think>", "</think>"), inside=False)


class Reply(SimpleNamespace):
    """A Generation as take_text reads it (its shape, its stream's text and tokens, the
    time of its first frame)."""


def reply(shape, text: str, tokens: int | None = None) -> Reply:
    stream = SimpleNamespace(text=text, tokens=None if tokens is None else [0] * tokens)
    return Reply(shape=shape, stream=stream, text=text, first_frame_at=None)


def test_each_frame_splits_the_streams_text() -> None:
    msg = ChatMessage("assistant", "", streaming=True)
    gen = reply(TAGS, "<think>\nstep one", tokens=4)
    take_text(msg, gen)
    assert (msg.reasoning, msg.content) == ("step one", "")
    assert thinking_live(msg) and msg.reasoning_tokens == 4 and msg.thinking_s is not None
    gen.text = gen.stream.text = "<think>\nstep one\nstep two\n</thi"
    gen.stream.tokens += [0] * 5
    take_text(msg, gen)  # the closing tag still arriving: held back, never shown
    assert (msg.reasoning, msg.content) == ("step one\nstep two", "")
    assert msg.reasoning_tokens == 9
    gen.text = gen.stream.text = "<think>\nstep one\nstep two\n</think>\n\nFour."
    gen.stream.tokens += [0] * 4
    take_text(msg, gen)
    assert (msg.reasoning, msg.content) == ("step one\nstep two", "Four.")
    assert msg.reasoning_tokens == 9  # taken while it thought
    msg.streaming = False
    take_text(msg, gen, final=True)
    assert not thinking_live(msg) and msg.content == "Four."


def test_a_reply_cut_inside_its_thinking_keeps_it_at_the_end() -> None:
    msg = ChatMessage("assistant", "", streaming=True)
    gen = reply(TAGS, "<think>cut off </thi", tokens=3)
    take_text(msg, gen)
    assert msg.reasoning == "cut off"
    take_text(msg, gen, final=True)
    assert (msg.reasoning, msg.content) == ("cut off </thi", "")


def test_a_model_that_does_not_think_keeps_the_streams_string() -> None:
    msg = ChatMessage("assistant", "", streaming=True)
    gen = reply(None, " <think> is just text")
    take_text(msg, gen)
    assert msg.content is gen.text and msg.reasoning == ""
    assert msg.thinking_s is None and not thinking_live(msg)


def test_a_remote_reply_has_no_token_count() -> None:
    msg = ChatMessage("assistant", "", streaming=True)
    take_text(msg, reply(TAGS, "<think>hm"))
    assert msg.reasoning == "hm" and msg.reasoning_tokens is None


def test_a_harmony_replys_calls_are_taken_as_the_tabs_calls() -> None:
    from app.reply_tools import reply_calls

    shape = Shape(ReasoningStyle("harmony", "<|channel|>analysis<|message|>", "<|end|>"),
                  inside=False)
    text = ("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
            '{"city": "Paris"}')
    gen = reply(shape, text)
    gen.call_format, gen.tool_names = None, ["get_weather"]
    msg = ChatMessage("assistant", "", streaming=True)
    take_text(msg, gen, final=True)
    assert (msg.reasoning, msg.content) == ("Need the weather.", "")
    answer, calls = reply_calls(gen, msg.content)
    assert answer == "" and [(c["function"]["name"], c["function"]["arguments"])
                             for c in calls] == [("get_weather", '{"city": "Paris"}')]


def test_at_the_end_the_thinking_tokens_are_counted_up_to_its_end_token() -> None:
    shape = Shape(TAGS.style, inside=False, end_token=99)
    msg = ChatMessage("assistant", "", streaming=True)
    gen = reply(shape, "<think>a b</think>answer")
    gen.stream.tokens = [5, 6, 7, 99, 8, 9]
    take_text(msg, gen, final=True)
    assert msg.reasoning_tokens == 4 and msg.content == "answer"


def test_a_call_that_closes_the_thinking_is_the_tabs_call() -> None:
    """Qwen3.6 writes its call before `</think>` (LM Studio #1870): the tab runs it; a call
    followed by more thinking is a rehearsal and stays in the thinking."""
    from app.reply_tools import reply_calls
    from app.tools import HERMES

    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    gen = reply(TAGS, f"<think>Need the weather.\n{call}\n")
    gen.call_format, gen.tool_names = HERMES, ["get_weather"]
    msg = ChatMessage("assistant", "", streaming=True)
    take_text(msg, gen)
    assert (msg.reasoning, msg.content) == ("Need the weather.", "")  # the call held back
    gen.text = gen.stream.text = gen.text + "</think>\n\n"
    take_text(msg, gen, final=True)
    assert msg.reasoning == "Need the weather."
    answer, calls = reply_calls(gen, msg.content)
    assert answer == "" and [(c["function"]["name"], c["function"]["arguments"])
                             for c in calls] == [("get_weather", '{"city": "Paris"}')]
    rehearsal = reply(TAGS, f"<think>Maybe {call} no.</think>Sunny, I guess.")
    rehearsal.call_format, rehearsal.tool_names = HERMES, ["get_weather"]
    take_text(msg, rehearsal, final=True)
    assert call in msg.reasoning and msg.content == "Sunny, I guess."
    assert reply_calls(rehearsal, msg.content) is None


def test_each_frame_feeds_the_splitter_only_the_new_text(monkeypatch) -> None:
    """A Harmony reply is parsed by openai-harmony a token at a time: each frame gives the
    splitter the text since the last frame, never the whole text again, and the parts are
    those of the whole reply split at once."""
    from app.reasoning import reply as reply_module
    from engine.public import ReasoningSplit, split_whole

    fed: list[str] = []

    def recording(*args):
        split = ReasoningSplit(*args)
        feed = split.feed
        split.feed = lambda t: fed.append(t) or feed(t)
        return split

    monkeypatch.setattr(reply_module, "ReasoningSplit", recording)
    style = ReasoningStyle("harmony", "<|channel|>analysis<|message|>", "<|end|>")
    text = ("<|channel|>analysis<|message|>Step one. Step two.<|end|><|start|>assistant"
            "<|channel|>final<|message|>Four.<|return|>")
    gen = reply(Shape(style, inside=False), "")
    msg = ChatMessage("assistant", "", streaming=True)
    for cut in range(7, len(text), 7):
        gen.text = gen.stream.text = text[:cut]
        take_text(msg, gen)
        assert "Step one. Step two.".startswith(msg.reasoning)  # no marker ever shown
    gen.text = gen.stream.text = text
    take_text(msg, gen, final=True)
    assert "".join(fed) == text  # each character fed once
    assert (msg.reasoning, msg.content) == split_whole(text, style)[:2] == (
        "Step one. Step two.", "Four.")
