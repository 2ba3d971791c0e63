"""A thinking budget as a grammar (llguidance's Lark), so it is enforced per row by the
engine's constrained decoding (engine/constraint.py): the row's thinking is free text of
at most N tokens (`max_tokens` on its lexeme), after which the grammar allows only the
family's end of thinking (its tokens forced, one a step), then the answer: free, or the
response format's JSON. Rows without it keep their logits bit for bit (constraint.py's
select), so a budgeted row changes no other row's tokens.

The same grammar without a budget keeps a response format off the thinking: the format
applies to the answer after it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .style import ReasoningStyle

FREE = "/(?s:.*)/"


def budget_grammar(style: ReasoningStyle, budget: int | None, *, inside: bool = False,
                   answer_schema: Mapping[str, Any] | None = None, strict: bool = True,
                   tag_tokens: bool | tuple[bool, bool] = False,
                   answer_rules: str | None = None) -> str:
    """The Lark grammar of a reply that thinks for at most `budget` tokens (None: no
    limit) and then answers (`answer_schema`: a JSON schema the answer must match;
    `answer_rules`: Lark rules whose top rule is `answer`, a forced tool call's, after
    blank space; neither: free text). `inside`: the prompt opened the thinking, so the
    reply starts in it.
    `tag_tokens`: the start and end tags are single tokens of the vocabulary (Qwen3's
    added `<think>`), which llguidance matches as tokens, never as their text; a pair says
    it of each (start, end)."""
    limit = "" if budget is None else f"[max_tokens={int(budget)}]"
    answer = FREE if answer_schema is None else _json(answer_schema, strict)
    if style.harmony:
        # special tokens are matched as tokens (<|…|>), never by the free text's regex
        head = "" if inside else '<|channel|> "analysis" <|message|> '
        rules = [f'start: {head}think <|end|> <|start|> "assistant" <|channel|> "final" '
                 "<|message|> answer",
                 f"think{limit}: {FREE}"]
    else:
        start, end = tag_tokens if isinstance(tag_tokens, tuple) else (tag_tokens,) * 2
        head = "" if inside else f"{(_token if start else _quote)(style.start)} "
        rules = [f"start: {head}think {(_token if end else _quote)(style.end)} answer",
                 # lazy: the first end tag closes the thinking
                 f"think{limit}: /(?s:.*?)/"]
    if answer_rules is not None:  # the family's blank space after its thinking, then them
        rules[0] = rules[0].removesuffix(" answer") + ' /[ \\t\\n]*/ answer'
        return "\n".join(rules) + "\n" + answer_rules
    rules.append(f"answer: {answer}")
    return "\n".join(rules) + "\n"


def _json(schema: Mapping[str, Any], strict: bool) -> str:
    options = {"whitespace_flexible": False} if strict else {}
    return "%json " + json.dumps({**dict(schema), **({"x-guidance": options}
                                                      if options else {})})


def _quote(text: str) -> str:
    return json.dumps(text)


def _token(text: str) -> str:
    """A token by its text, in llguidance's Lark (`<think>`: that one token)."""
    return text if text.startswith("<") and text.endswith(">") else f"<{text}>"
