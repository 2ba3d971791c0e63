"""A reply's text is held in one place in the app: its stream while it streams, then its
ChatMessage. The tab's view, the saved row and the API's response all read that one text
(docs/architecture.md, "A reply's text")."""

from __future__ import annotations

import socket

from tests.api_clients import openai_client
from tests.ui.conftest import run_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_shown_saved_and_served_text_is_the_streams(history_app, loop):
    history_app.settings.server_port = port = free_port()
    window = history_app.start()
    tab = window.current_tab()
    tab.panel.fields["temperature"].setValue(0.0)
    tab.panel.fields["max_tokens"].setValue(400)
    conv = tab.conversation

    # at every frame the message holds the stream's own string, not an accumulated copy
    frames: list[bool] = []

    def on_change(msg, what):
        if what == "text":
            frames.append(msg.content is conv.running[msg.id].stream.text)

    conv.message_changed.connect(on_change)
    assert conv.send("Tell me about the sea")
    run_until(loop, lambda: not conv.is_busy)
    gen, user, reply = conv.generations[-1], conv.messages[0], conv.messages[1]
    assert len(frames) >= 2 and all(frames)  # several frames, each the stream's string
    assert reply.content != "" and reply.content is gen.stream.text
    # the Generation counts what views had; it keeps no text beside its stream
    assert gen.shown_chars == len(reply.content)
    assert all(value != reply.content for name, value in vars(gen).items() if name != "stream")
    assert tab.messages.widgets[1].body.source_text == reply.content

    run_until(loop, lambda: any(
        m.id == reply.id and m.is_complete
        for m in history_app.history.reader.list_messages(conv.session_id)))
    saved = {m.id: m for m in history_app.history.reader.list_messages(conv.session_id)}
    assert saved[reply.id].content == reply.content

    # the API server's reply to the same prompt and settings, through the same road
    window.api_server.action.trigger()
    run_until(loop, lambda: window.api_server.server.running)
    client = openai_client(f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
    params = reply.params or {}
    served = loop.run_until_complete(client.chat.completions.create(
        model=loop.run_until_complete(client.models.list()).data[0].id,
        messages=conv.prompt_messages(user), max_tokens=400, temperature=0,
        top_p=params["top_p"], extra_body={
            k: params[k] for k in ("top_k", "min_p", "repetition_penalty")}))
    assert served.choices[0].message.content == reply.content
    loop.run_until_complete(client.close())
