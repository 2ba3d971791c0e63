"""tool_choice has one reading (app/request/tool_choice.py): the API server's body and a
tab's settings reach it in their own forms and get the same meaning, the same grammar and
the same refusals."""

from __future__ import annotations

from typing import Any

import pytest

from app.request import Refusal, RefusalCode, engine_input
from app.request.tab import tab_request
from app.request.tool_choice import named, parse_tool_choice
from app.server import schemas
from app.tools import parse_tools

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]}}},
]
MESSAGES = [{"role": "user", "content": "Weather in Oslo?"}]


def api(tool_choice: Any, tools: list[dict[str, Any]] | None = TOOLS):
    body: dict[str, Any] = {"model": "m", "messages": MESSAGES, "parallel_tool_calls": False,
                            "tool_choice": tool_choice}
    if tools is not None:
        body["tools"] = tools
    return schemas.parse_chat(body, 16)


def tab(tool_choice: str, *, local: bool = True):
    return tab_request(MESSAGES, {"max_tokens": 16}, TOOLS, tool_choice, local=local)


@pytest.mark.parametrize(("api_form", "tab_form"), [
    ("auto", "auto"), ("none", "none"), ("required", "required"),
    (named("get_weather"), "get_weather")])
def test_the_api_and_a_tab_mean_the_same(api_form, tab_form):
    from_api, from_tab = api(api_form), tab(tab_form)
    assert from_api.tool_choice == from_tab.tool_choice == api_form
    assert from_api.forced == from_tab.forced == (tab_form not in ("auto", "none"))
    assert from_api.grammar == from_tab.grammar  # one forced call (no parallel calls)
    assert (from_api.grammar is not None) == from_api.forced
    if tab_form == "none":
        assert from_api.tools == from_tab.tools == ()
    elif tab_form == "get_weather":  # a tab that names a function offers only it
        assert [t.name for t in from_tab.tools] == ["get_weather"]
        assert [t.name for t in from_api.tools] == ["get_weather", "add"]
    else:
        assert from_api.tools == from_tab.tools and len(from_api.tools) == 2


def test_a_tab_naming_a_tool_no_longer_offered_must_call_one_of_them():
    stale = tab("get_forecast")  # its server renamed it: a call to any tool, as before
    assert stale.tool_choice == "required" and stale.forced
    assert stale.grammar == tab("required").grammar and len(stale.tools) == 2


def test_a_remote_server_is_sent_openais_form():
    for tab_form, sent in [("get_forecast", named("get_forecast")), ("required", "required")]:
        request = tab(tab_form, local=False)
        assert request.grammar is None and not request.forced  # the server forces it
        _, _, extra = engine_input.remote_call(request)
        assert extra["tool_choice"] == sent and extra["tools"] == TOOLS


@pytest.mark.parametrize(("value", "tools", "says"), [
    ("sometimes", TOOLS, "'tool_choice' must be one of auto, none, required or a named"),
    (3, TOOLS, "'tool_choice' must be one of"),
    (named("nope"), TOOLS, "'tool_choice' must name one of 'tools'"),
    ({"type": "tool", "function": {"name": "add"}}, TOOLS, "'tool_choice' must name one of"),
    ("required", None, "'tool_choice': 'required' needs 'tools'"),
    ("auto", None, "'tool_choice': 'auto' needs 'tools'"),
])
def test_refusals_come_from_the_one_parser(value, tools, says):
    with pytest.raises(Refusal) as direct:
        parse_tool_choice(value, parse_tools(tools) if tools else [], parallel=True)
    with pytest.raises(Refusal) as served:
        api(value, tools)
    for refused in (direct.value, served.value):
        assert (refused.code, refused.param) == (RefusalCode.INVALID_VALUE, "tool_choice")
        assert refused.message.startswith(says)
    assert served.value.message == direct.value.message


def test_parallel_required_calls_are_the_apis_to_ask_for():
    offered = parse_tools(TOOLS)
    one = parse_tool_choice("required", offered, parallel=False)
    several = parse_tool_choice("required", offered, parallel=True)
    named_one = parse_tool_choice(named("add"), offered, parallel=True)
    assert one.grammar != several.grammar  # 1 to 4 calls
    assert [t.name for t in named_one.forced] == ["add"]  # a named call is always one
    assert named_one.grammar == parse_tool_choice(named("add"), offered, parallel=False).grammar
    assert parse_tool_choice(None, offered, parallel=True).mode == "auto"
    assert parse_tool_choice(None, [], parallel=True).mode == "none"
