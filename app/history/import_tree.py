"""An imported chat's messages made a consistent tree before they are written.

An export from before trees (format version 1) names no parents: its messages become one
path, each following the one before by seq (as migration m005 did to the history). A
parent must be an earlier message (lower seq) of the same chat that is being added: one
that names no such message (missing, in another chat, a loop) starts the chat instead,
and the import report says so. The message shown must be one of the chat's.
"""

from __future__ import annotations

from app.storage import Message, Session


def link_messages(session: Session, messages: list[Message], *, chain: bool) -> list[str]:
    """Set the messages' parents (and the session's shown message) so they form a tree;
    what was changed, as notes for the import report."""
    notes = []
    if chain:
        _chain(messages)
    else:
        by_id = {m.id: m for m in messages}
        lost = 0
        for m in messages:
            parent = by_id.get(m.parent_id or "")
            if m.parent_id is not None and (parent is None or parent.seq >= m.seq):
                m.parent_id = None
                lost += 1
        if lost:
            notes.append(f"In “{session.title}”, {lost} message{'s' if lost != 1 else ''} "
                         "named a parent that is not an earlier message of that chat; "
                         f"{'they start' if lost != 1 else 'it starts'} the chat instead.")
    if session.shown_leaf_id is not None and session.shown_leaf_id not in {
            m.id for m in messages}:
        session.shown_leaf_id = None
        notes.append(f"In “{session.title}”, the message to show is not in the chat; "
                     "its newest messages are shown.")
    return notes


def _chain(messages: list[Message]) -> None:
    """Each message follows the last one made before it (lower seq): one path, as
    migration m005 linked the history's chats."""
    ordered = sorted(messages, key=lambda m: (m.seq, m.created_at, m.id))
    before: Message | None = None  # the last message of a lower seq
    run: list[Message] = []  # the messages of the current seq
    for m in ordered:
        if run and m.seq != run[0].seq:
            before = run[-1]
            run = []
        m.parent_id = before.id if before is not None else None
        run.append(m)
