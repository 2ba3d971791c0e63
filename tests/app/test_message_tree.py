"""MessageTree alone: versions, the path shown, remembered branches, delete and undo."""

from __future__ import annotations

from app.message_tree import ChatMessage, MessageTree


def msg(role: str, text: str) -> ChatMessage:
    return ChatMessage(role, text)


def texts(tree: MessageTree) -> list[str]:
    return [m.content for m in tree.path]


def two_turns() -> tuple[MessageTree, list[ChatMessage]]:
    path = [msg("user", "q1"), msg("assistant", "a1"), msg("user", "q2"), msg("assistant", "a2")]
    return MessageTree.chain(path), path


def test_a_chain_is_one_path_each_message_following_the_one_before() -> None:
    tree, path = two_turns()
    assert texts(tree) == ["q1", "a1", "q2", "a2"]
    assert [m.parent_id for m in path] == [None, path[0].id, path[1].id, path[2].id]
    assert [m.seq for m in path] == [0, 1, 2, 3]
    assert [tree.version(m) for m in path] == [(1, 1)] * 4
    assert tree.ancestors(path[3]) == path[:3]


def test_versions_are_siblings_in_the_order_made_and_the_path_follows_the_one_shown() -> None:
    tree, path = two_turns()
    a2b = msg("assistant", "a2b")
    tree.add(a2b, path[2])
    assert texts(tree) == ["q1", "a1", "q2", "a2"]  # adding does not change what is shown
    tree.show(a2b.id)
    assert texts(tree) == ["q1", "a1", "q2", "a2b"]
    assert tree.version(a2b) == (2, 2) and tree.version(path[3]) == (1, 2)
    assert tree.siblings(a2b) == [path[3], a2b]


def test_switching_back_to_a_version_returns_to_the_branch_shown_below_it() -> None:
    tree, path = two_turns()
    q1b, a1b = msg("user", "q1b"), msg("assistant", "a1b")
    tree.add(q1b, None)
    tree.add(a1b, q1b)
    tree.show(a1b.id)
    assert texts(tree) == ["q1b", "a1b"]
    a2b = msg("assistant", "a2b")
    tree.add(a2b, path[2])
    tree.show(path[3].id)  # the older version of the last reply, shown last on that branch
    tree.show(q1b.id)
    tree.show(path[0].id)
    assert texts(tree) == ["q1", "a1", "q2", "a2"]  # not the newest (a2b): the one shown
    tree.show(a1b.id)
    tree.show(path[0].id)
    assert texts(tree) == ["q1", "a1", "q2", "a2"]


def test_showing_a_message_with_no_branch_shown_below_takes_the_newest() -> None:
    tree, path = two_turns()
    tree.show(path[0].id)
    assert texts(tree) == ["q1", "a1", "q2", "a2"]
    late = msg("assistant", "a2 late")
    tree.add(late, path[2])
    fresh = MessageTree(list(tree.nodes.values()))  # loaded with no shown leaf
    assert texts(fresh) == ["q1", "a1", "q2", "a2 late"]
    again = MessageTree(list(tree.nodes.values()), shown_leaf_id=path[3].id)
    assert texts(again) == ["q1", "a1", "q2", "a2"]


def test_remove_takes_everything_below_and_shows_the_nearest_version_left() -> None:
    tree, path = two_turns()
    a1b = msg("assistant", "a1b")
    tree.add(a1b, path[0])
    tree.show(path[1].id)
    removed = tree.remove(path[1])
    assert [m.content for m in removed.messages] == ["a1", "q2", "a2"]
    assert texts(tree) == ["q1", "a1b"] and set(tree.nodes) == {path[0].id, a1b.id}
    tree.restore(removed)
    assert texts(tree) == ["q1", "a1", "q2", "a2"]
    assert list(tree.nodes) == [path[0].id, path[1].id, path[2].id, path[3].id, a1b.id]


def test_removing_the_only_version_ends_the_path_at_its_parent_and_a_root_empties_it() -> None:
    tree, path = two_turns()
    tree.remove(path[2])
    assert texts(tree) == ["q1", "a1"]
    removed = tree.remove(path[0])
    assert tree.path == [] and tree.nodes == {}
    tree.restore(removed)
    assert texts(tree) == ["q1", "a1"]


def test_a_message_whose_parent_is_missing_starts_the_chat() -> None:
    orphan = ChatMessage("user", "left", parent_id="gone", seq=5)
    tree = MessageTree([orphan])
    assert orphan.parent_id is None and texts(tree) == ["left"]


def test_a_parent_made_after_its_child_is_dropped_so_a_loop_cannot_hang() -> None:
    """A damaged or hand-edited history: q names a as its parent and a names q."""
    q = ChatMessage("user", "q", id="q", parent_id="a", seq=0)
    a = ChatMessage("assistant", "a", id="a", parent_id="q", seq=1)
    me = ChatMessage("user", "me", id="me", parent_id="me", seq=2)
    tree = MessageTree([q, a, me], shown_leaf_id="a")
    assert q.parent_id is None and a.parent_id == "q" and me.parent_id is None
    assert texts(tree) == ["q", "a"] and tree.ancestors(a) == [q]
