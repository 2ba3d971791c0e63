"""A tab's output format in its settings panel: a bad schema file is refused with a message
(the format and saved params unchanged, nothing sent); a schema file's format is saved with
the chat's params and the reply (tiny model, enforced by the engine) parses and validates;
a hand-edited unusable format is refused at send with a notice, nothing sent."""

from __future__ import annotations

import json

import jsonschema

from tests.ui.conftest import run_until

FLAG = {"type": "object", "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"], "additionalProperties": False}


def test_a_bad_schema_file_is_refused_in_the_tab(window, tmp_path):
    tab = window.current_tab()
    box = tab.panel.output_format
    before = dict(tab.conversation.params)
    bad = tmp_path / "broken.json"
    bad.write_text('{"type": "object", "properties": {"a": {"type": "nope"}}}')
    assert not box.load_file(str(bad))
    assert not box.error.isHidden()
    assert "Schema not used: broken.json: not a valid JSON schema" in box.error.text()
    assert box.kind.currentText() == "Text" and box.value() is None
    assert tab.conversation.params == before
    assert not box.load_file(str(tmp_path / "nowhere.json"))
    assert "nowhere.json: no such file" in box.error.text()


def test_a_json_schema_tab_replies_with_valid_json(window, loop, tmp_path):
    tab = window.current_tab()
    box = tab.panel.output_format
    path = tmp_path / "flag.json"
    path.write_text(json.dumps(FLAG))
    assert box.load_file(str(path))
    assert box.error.isHidden()
    assert box.kind.currentText() == "JSON schema" and "flag" in box.label.text()
    fmt = tab.conversation.params["response_format"]
    assert fmt["json_schema"]["schema"] == FLAG  # the schema is saved, not the grammar
    tab.panel.fields["max_tokens"].setValue(40)
    assert tab.send_text("Is water wet?")
    conv = tab.conversation
    run_until(loop, lambda: not conv.is_busy, timeout=60)
    reply = conv.messages[-1].content
    jsonschema.validate(json.loads(reply), FLAG)
    assert conv.messages[-1].params["response_format"] == fmt


def test_choosing_json_then_text_in_the_combo(window):
    tab = window.current_tab()
    box = tab.panel.output_format
    box.kind.setCurrentIndex(1)
    box.kind.activated.emit(1)
    assert tab.conversation.params["response_format"] == {"type": "json_object"}
    box.kind.setCurrentIndex(0)
    box.kind.activated.emit(0)
    assert "response_format" not in tab.conversation.params


def test_an_unusable_saved_format_is_refused_at_send(window, loop):
    tab = window.current_tab()
    tab.conversation.params["response_format"] = {"type": "json_schema",
                                                  "json_schema": {"schema": {"type": 7}}}
    tab.send_text("hello")
    assert tab.notice.isVisible()
    assert "Request refused: not a valid JSON schema" in tab.notice.text()
    assert not tab.conversation.is_busy
    assert not [m for m in tab.conversation.messages if m.role == "assistant" and m.content]
