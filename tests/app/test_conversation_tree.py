"""Conversation as a tree on a real engine (tiny model): versions, several answers at once,
delete and undo, branches and compare. Each answer is checked against a chat asking alone."""

from __future__ import annotations

import pytest

from app.conversation import Conversation, ReplyTarget
from app.request import Refusal, RefusalCode
from ui.refusals import notice_text

from .history_sync_helpers import FAST, start_bridge, wait_until

SAMPLED = FAST | {"temperature": 1.0, "seed": 5}


@pytest.fixture
async def bridge():
    b = await start_bridge()
    yield b
    await b.shutdown(timeout=2.0)


async def answer_alone(bridge, text: str, params: dict) -> list[int]:
    conv = Conversation(bridge, params=params)
    assert conv.send(text)
    await wait_until(lambda: not conv.is_busy)
    return conv.messages[-1].token_ids


async def chat_of(bridge, params: dict, *texts: str) -> Conversation:
    """A chat that has sent `texts`, each answered."""
    conv = Conversation(bridge, params=params)
    for text in texts:
        assert conv.send(text)
        await wait_until(lambda: not conv.is_busy)
    return conv


def record(conv: Conversation) -> list[tuple]:
    seen: list[tuple] = []
    for name in ("path_changed", "messages_removed", "message_added", "busy_changed"):
        getattr(conv, name).connect(lambda *a, name=name: seen.append((name, *a)))
    return seen


async def test_regenerate_keeps_the_old_reply_as_a_version(bridge) -> None:
    conv = Conversation(bridge, params=SAMPLED)
    conv.send("hello")
    await wait_until(lambda: not conv.is_busy)
    first = conv.messages[1]
    seen = record(conv)
    assert conv.regenerate()
    await wait_until(lambda: not conv.is_busy)
    second = conv.messages[1]
    assert second is not first and conv.versions(1) == (2, 2)
    assert second.parent_id == first.parent_id == conv.messages[0].id
    assert ("path_changed",) in seen and ("message_added", second) in seen
    assert conv.switch_version(1, -1) and conv.messages[1] is first
    assert not conv.switch_version(1, -1)  # no version before the first
    assert conv.switch_version(1, +1) and conv.messages[1] is second


async def test_n_answers_at_once_are_versions_each_as_its_seed_answers_alone(bridge) -> None:
    conv = Conversation(bridge, params=SAMPLED)
    seen = record(conv)
    before = bridge.stats().total_prompt_tokens
    assert conv.send("tell me", n=3)
    assert conv.is_busy and len(conv.running) == 3
    await wait_until(lambda: not conv.is_busy)
    replies = conv.tree.siblings(conv.messages[1])
    # the prompt was prefilled once: the two others computed only their last token
    prompt = replies[0].stats.prompt_tokens
    assert bridge.stats().total_prompt_tokens - before == prompt + 2
    assert [r.params["seed"] for r in replies] == [5, 6, 7]
    assert conv.messages[1] is replies[0] and conv.versions(1) == (1, 3)
    assert [s for s in seen if s[0] == "busy_changed"] == [("busy_changed", True),
                                                          ("busy_changed", False)]
    for i, reply in enumerate(replies):
        assert reply.token_ids == await answer_alone(bridge, "tell me", SAMPLED | {
            "seed": 5 + i})
    assert len({tuple(r.token_ids) for r in replies}) > 1  # different seeds, answers


async def test_n_outside_one_to_four_is_refused_with_a_notice(bridge) -> None:
    conv = Conversation(bridge, params=SAMPLED)
    notes: list[Refusal] = []
    conv.notice.connect(notes.append)
    assert not conv.send("hi", n=5) and not conv.tree.nodes
    assert notes and notes[0].code == RefusalCode.ANSWER_COUNT
    assert notice_text(notes[0]) == "Ask for 1 to 4 answers at once (not 5)."


async def test_delete_takes_the_rest_of_the_path_and_undo_puts_it_back(bridge) -> None:
    conv = await chat_of(bridge, FAST, "one", "two")
    before = list(conv.messages)
    seen = record(conv)
    assert conv.delete(2)
    assert conv.messages == before[:2] and conv.can_undo_delete
    assert ("messages_removed", before[2:]) in seen
    assert conv.undo_delete()
    assert conv.messages == before and not conv.can_undo_delete
    assert [s[1] for s in seen if s[0] == "message_added"] == before[2:]


async def test_delete_is_refused_while_a_reply_runs(bridge) -> None:
    conv = Conversation(bridge, params=FAST | {"max_tokens": 200})
    conv.send("long")
    assert not conv.delete(0) and len(conv.messages) == 2
    conv.stop()
    await wait_until(lambda: not conv.is_busy)


async def test_edit_keeps_the_old_branch_as_the_other_version(bridge) -> None:
    conv = await chat_of(bridge, FAST, "one", "two")
    old = list(conv.messages)
    assert conv.edit_and_resend(2, "two, edited")
    await wait_until(lambda: not conv.is_busy)
    assert [m.content for m in conv.messages[:3]] == ["one", old[1].content, "two, edited"]
    assert conv.versions(2) == (2, 2)
    assert conv.switch_version(2, -1) and conv.messages == old


async def test_a_branch_copies_the_path_and_its_next_turn_comes_from_the_cache(bridge) -> None:
    conv = await chat_of(bridge, FAST, "one", "two")
    conv.rename("Main")
    branch = conv.branch(1)
    assert branch.title == "Branch · Main" and branch.session_id != conv.session_id
    assert [m.content for m in branch.messages] == [m.content for m in conv.messages[:2]]
    assert [m.token_ids for m in branch.messages] == [m.token_ids for m in conv.messages[:2]]
    assert not {m.id for m in branch.messages} & set(conv.tree.nodes)
    assert branch.messages[1].parent_id == branch.messages[0].id
    assert branch.send("three")
    await wait_until(lambda: not branch.is_busy)
    stats = branch.messages[-1].stats
    assert stats.cached_tokens > 0 and stats.cached_tokens < stats.prompt_tokens
    assert len(conv.messages) == 4  # the original is untouched


async def test_compare_asks_every_target_at_once_and_a_pick_is_shown(bridge) -> None:
    conv = Conversation(bridge, params=FAST)
    targets = [ReplyTarget(None, FAST, "greedy"), ReplyTarget(None, SAMPLED, "sampled")]
    replies = conv.compare("which?", targets)
    assert len(replies) == 2 and conv.is_busy
    assert conv.compare("again?", targets) == []  # nothing is sent while replies run
    await wait_until(lambda: not conv.is_busy)
    assert [r.params for r in replies] == [FAST, SAMPLED]
    assert replies[0].token_ids == await answer_alone(bridge, "which?", FAST)
    assert replies[1].token_ids == await answer_alone(bridge, "which?", SAMPLED)
    assert conv.messages[1] is replies[0]
    conv.show(replies[1].id)
    assert conv.messages[1] is replies[1] and conv.versions(1) == (2, 2)


async def test_compare_says_per_target_why_one_was_refused(bridge) -> None:
    conv = Conversation(bridge, params=FAST)
    bad = ReplyTarget("no such connection", FAST, "gone")
    outcomes = conv.compare("which?", [bad, ReplyTarget(None, FAST, "local")])
    assert isinstance(outcomes[0], Refusal) and "no such connection" in outcomes[0].message
    assert outcomes[1] is conv.messages[1]  # the reply that started is the one shown
    await wait_until(lambda: not conv.is_busy)
