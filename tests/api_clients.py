"""The official `openai` and `anthropic` clients for tests, sharing one TLS context.

Each client otherwise builds its own, loading the CA bundle (~35 ms of CPU), and the suite
makes hundreds of them for plain-HTTP servers on loopback."""

from __future__ import annotations

import functools
import ssl
from typing import Any

from anthropic import AsyncAnthropic
from anthropic import DefaultAsyncHttpxClient as AnthropicHttp
from openai import AsyncOpenAI
from openai import DefaultAsyncHttpxClient as OpenAIHttp


@functools.cache
def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


def openai_client(base_url: str, **kw: Any) -> AsyncOpenAI:
    """`AsyncOpenAI(base_url=..., **kw)` over the shared TLS context."""
    return AsyncOpenAI(base_url=base_url, http_client=OpenAIHttp(verify=_tls()), **kw)


def anthropic_client(base_url: str, **kw: Any) -> AsyncAnthropic:
    """`AsyncAnthropic(base_url=..., **kw)` over the shared TLS context."""
    return AsyncAnthropic(base_url=base_url, http_client=AnthropicHttp(verify=_tls()), **kw)
