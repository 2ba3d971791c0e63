"""Tool calling without Qt or a server: tools parsed from OpenAI's shape, rendered into a
prompt, calls parsed out of a reply (whole or streamed), and the grammar that forces a call.

Used by app/server (the API's `tools`) and by the tabs. docs/server.md describes the format.
"""

from .calls import ToolCall, new_call_id
from .formats import HERMES, CallFormat, call_format
from .grammar import call_grammar, call_rules
from .parse import CallStream, Parsed, StreamDelta, parse_reply
from .prompt import Renderer, tool_prompt
from .render import fallback_messages, template_messages, tools_section
from .spec import Tool, ToolSpecError, parse_tools

__all__ = [
    "HERMES",
    "CallFormat",
    "CallStream",
    "Parsed",
    "Renderer",
    "StreamDelta",
    "Tool",
    "ToolCall",
    "ToolSpecError",
    "call_format",
    "call_grammar",
    "call_rules",
    "fallback_messages",
    "new_call_id",
    "parse_reply",
    "parse_tools",
    "template_messages",
    "tool_prompt",
    "tools_section",
]
