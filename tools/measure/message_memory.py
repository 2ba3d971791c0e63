"""What the window holds for each chat message, measured: a message list like a tab's, on
the app's stylesheet, gets a user message and a reply (a few paragraphs of Markdown) at a
time; every `--step` replies, the process's RSS over the start, per message. No engine: the
window's own share of a long session's growth (issue #46 item 14, docs/memory.md). With
`--stream` each reply's text also arrives four words at a time, as a streaming reply's
renders do. Runnable by hand:

    QT_QPA_PLATFORM=offscreen python -m tools.measure.message_memory --replies 64
"""

from __future__ import annotations

import argparse
import gc
import os

MIB = 1 << 20
REPLY = ("The quick brown fox jumps over the lazy dog, and **then** it runs `far` away. "
         "Here is a list:\n\n- one item\n- two items\n\n") * 6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replies", type=int, default=64)
    p.add_argument("--step", type=int, default=16)
    p.add_argument("--stream", action="store_true")
    args = p.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from engine.preload import ensure_preloads

    ensure_preloads()  # the app's allocator (mimalloc on Linux), as in the window

    from PySide6.QtWidgets import QApplication

    from app.message_tree import ChatMessage
    from app.process_memory import resident_bytes
    from engine.allocator import give_back_freed_memory
    from ui.chat.message_view import MessageList
    from ui.theme import stylesheet

    app = QApplication([])
    app.setStyleSheet(stylesheet(False))

    def settled_rss() -> int:
        gc.collect()
        app.processEvents()
        give_back_freed_memory()
        return resident_bytes() or 0

    view = MessageList()
    view.resize(900, 700)
    view.show()
    start = settled_rss()
    print(f"start: RSS {start / MIB:.0f} MiB", flush=True)
    words = REPLY.split(" ")
    for i in range(args.replies):
        view.add(len(view.widgets), ChatMessage("user", f"Question {i}: tell me a story"))
        reply = ChatMessage("assistant", "", streaming=args.stream)
        view.add(len(view.widgets), reply)
        if args.stream:
            for k in range(0, len(words), 4):
                reply.content = " ".join(words[:k])
                view.refresh(len(view.widgets) - 1)
                app.processEvents()
            reply.streaming = False
        reply.content = REPLY
        view.refresh(len(view.widgets) - 1)
        app.processEvents()
        if (i + 1) % args.step == 0:
            now, messages = settled_rss(), 2 * (i + 1)
            print(f"{messages} messages: RSS {now / MIB:.0f} MiB, "
                  f"{(now - start) / messages / 1024:.0f} KiB a message", flush=True)


if __name__ == "__main__":
    main()
