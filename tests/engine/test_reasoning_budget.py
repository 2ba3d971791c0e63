"""Issue #49 (D): a thinking budget per row inside the continuous batch. A budgeted row's
thinking is at most N tokens, then the family's end of thinking is forced and the answer
follows; rows beside it keep exactly the tokens they have without it (and alone), and the
budgeted row's tokens are those it has alone (the same-answer guarantee holds with a
budget). On a tiny random-weight llama with Qwen3's and gpt-oss's real templates and
their markers as tokens (tests/reasoning_model.py), quantized so the native kernels'
answers do not depend on the batch."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Engine, SamplingParams
from engine.grammars import checked
from engine.reasoning import budget_grammar, split_whole, starts_inside, style_of
from tests.engine.conftest import run_to_end
from tests.reasoning_model import GPT_OSS, QWEN3, thinking_tiny

pytestmark = pytest.mark.usefixtures("native_built")

QUESTIONS = ["What is 2+2?", "Name a colour.", "Why is the sky blue?", "Count to three.",
             "Say hi.", "A prime?", "Spell cat.", "Capital of France?"]


@pytest.fixture(scope="module")
def qwen():
    return thinking_tiny(seed=7, template=QWEN3)


@pytest.fixture(scope="module")
def oss():
    return thinking_tiny(seed=5, template=GPT_OSS)


def engine_on(tiny, **config: Any) -> Engine:
    from engine import EngineConfig

    return Engine(tiny.model, tiny.tokenizer, eos_token_ids=sorted(tiny.eos_token_ids),
                  context_length=tiny.context_length, config=EngineConfig(**config))


class Reply:
    def __init__(self, engine: Engine, question: str, params: SamplingParams) -> None:
        self.stream = engine.submit([{"role": "user", "content": question}], params=params,
                                    template_kwargs={"enable_thinking": True})
        self.events: list[Any] = []
        self.stream.listen(self.events.append)

    @property
    def tokens(self) -> list[int]:
        return [e.token for e in self.events if e.token is not None]

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events)


def budgeted(tiny, budget: int | None, **sampling: Any) -> SamplingParams:
    style = style_of(tiny.tokenizer._tokenizer.chat_template)
    return SamplingParams(max_tokens=40, grammar=checked(budget_grammar(
        style, budget, tag_tokens=not style.harmony)), **sampling)


def seeded(seed: int) -> dict[str, Any]:
    return {"temperature": 0.9, "top_p": 0.95, "seed": seed}


def thinking_tokens(tiny, tokens: list[int]) -> int:
    """Tokens between the opening and the closing of the thinking."""
    vocab = tiny.tokenizer._tokenizer
    start = vocab.convert_tokens_to_ids("<think>")
    end = vocab.convert_tokens_to_ids("</think>")
    return tokens.index(end) - tokens.index(start) - 1


def alone(tiny, question: str, params: SamplingParams) -> list[int]:
    engine = engine_on(tiny)
    reply = Reply(engine, question, params)
    run_to_end(engine)
    return reply.tokens


def test_a_budgeted_row_in_a_batch_leaves_free_rows_exact(qwen) -> None:
    """4 budgeted rows (0, 3, 8 and 20 thinking tokens, greedy and seeded) among 4 free
    ones: the free rows' tokens are those of the same batch without budgets and of each
    alone; each budgeted row thinks exactly its budget (the random model never closes
    its thinking itself), then `</think>` and an answer, the tokens it has alone."""
    budgets = [0, 3, 8, 20]
    free = [SamplingParams(max_tokens=40, **(seeded(i) if i % 2 else {})) for i in range(4)]
    held = [budgeted(qwen, b, **(seeded(50 + i) if i % 2 else {}))
            for i, b in enumerate(budgets)]

    def run(with_budgets: bool) -> list[Reply]:
        engine = engine_on(qwen, max_concurrent=8)
        replies = []
        for i in range(4):
            replies.append(Reply(engine, QUESTIONS[2 * i], free[i]))
            replies.append(Reply(engine, QUESTIONS[2 * i + 1], held[i] if with_budgets
                                 else SamplingParams(max_tokens=40)))
        run_to_end(engine)
        return replies

    mixed, plain = run(True), run(False)
    style = style_of(qwen.tokenizer._tokenizer.chat_template)
    for i, budget in enumerate(budgets):
        assert mixed[2 * i].tokens == plain[2 * i].tokens
        assert mixed[2 * i].tokens == alone(qwen, QUESTIONS[2 * i], free[i])
        row = mixed[2 * i + 1]
        assert thinking_tokens(qwen, row.tokens) == budget
        reasoning, answer, _ = split_whole(row.text, style)
        assert row.text.startswith("<think>") and "</think>" in row.text
        assert answer == row.text.split("</think>", 1)[1].lstrip()
        assert row.tokens == alone(qwen, QUESTIONS[2 * i + 1], held[i])
        assert row.tokens != plain[2 * i + 1].tokens  # the budget did steer it


def test_a_reply_that_starts_inside_its_thinking(qwen) -> None:
    """DeepSeek-R1's way (the prompt opened `<think>`): the grammar starts in the thinking
    and closes it after the budget."""
    style = style_of(qwen.tokenizer._tokenizer.chat_template)
    engine = engine_on(qwen)
    params = SamplingParams(max_tokens=30, grammar=checked(budget_grammar(
        style, 5, inside=True, tag_tokens=True)))
    stream = engine.submit(prompt_tokens=qwen.tokenizer.encode("<think>\n"), params=params)
    run_to_end(engine)
    tokens = list(stream.tokens)
    end = qwen.tokenizer._tokenizer.convert_tokens_to_ids("</think>")
    assert tokens.index(end) == 5
    reasoning, answer, _ = split_whole(stream.text, style, inside=True)
    assert reasoning and reasoning in stream.text.split("</think>")[0]


def test_a_budget_with_an_answer_schema_keeps_the_schema_off_the_thinking(qwen) -> None:
    import json

    style = style_of(qwen.tokenizer._tokenizer.chat_template)
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 9}},
              "required": ["n"], "additionalProperties": False}
    engine = engine_on(qwen)
    reply = Reply(engine, "A number?", SamplingParams(max_tokens=60, grammar=checked(
        budget_grammar(style, 6, answer_schema=schema, tag_tokens=True))))
    run_to_end(engine)
    reasoning, answer, _ = split_whole(reply.text, style)
    assert thinking_tokens(qwen, reply.tokens) == 6
    assert json.loads(answer).keys() == {"n"}


def test_gpt_oss_analysis_budget(oss) -> None:
    """Harmony: the analysis channel is cut after the budget, `<|end|>` and the final
    channel's header forced, then the answer."""
    style = style_of(oss.tokenizer._tokenizer.chat_template)
    assert style.harmony
    engine = engine_on(oss)
    stream = engine.submit([{"role": "user", "content": "Hi"}], params=budgeted(oss, 4),
                           template_kwargs={"reasoning_effort": "low"})
    run_to_end(engine)
    vocab = oss.tokenizer._tokenizer
    tokens = list(stream.tokens)
    message, end = vocab.convert_tokens_to_ids("<|message|>"), vocab.convert_tokens_to_ids(
        "<|end|>")
    assert tokens.index(end) - tokens.index(message) - 1 == 4
    assert not starts_inside(style, "")
    reasoning, answer, _ = split_whole(stream.text, style)
    assert stream.text.startswith("<|channel|>analysis<|message|>")
    assert "<|channel|>final<|message|>" in stream.text and reasoning
