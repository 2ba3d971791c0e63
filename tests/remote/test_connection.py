"""Connection settings: validated when built, the API key never in an export."""

import subprocess
import sys
from pathlib import Path

import pytest

from app.remote import Connection, ConnectionConfigError
from app.remote.body import chat_body, sampling_of


@pytest.mark.parametrize(("url", "why"), [
    ("ftp://host:21", "must start with http:// or https://"),
    ("127.0.0.1:8000", "must start with http:// or https://"),
    ("http://", "has no host"),
    ("http://host:99999", "Bad port"),
])
def test_bad_urls_are_refused(url, why):
    with pytest.raises(ConnectionConfigError, match=why):
        Connection(url)


def test_timeouts_must_be_positive():
    with pytest.raises(ConnectionConfigError, match="read_timeout_s"):
        Connection("http://h", read_timeout_s=0)


def test_urls_with_and_without_v1_reach_the_same_endpoints():
    a, b = Connection("http://h:8000/"), Connection("https://h:8000/v1")
    assert a.url("chat/completions") == "http://h:8000/v1/chat/completions"
    assert b.url("models") == "https://h:8000/v1/models"
    assert a.name == "h:8000"


def test_exports_carry_no_key_and_read_back_without_it():
    conn = Connection("http://h:8000", model="m", api_key="sk-secret", name="lab")
    exported = conn.to_dict()
    assert "sk-secret" not in repr(exported) and exported["api_key"] == "***"
    assert Connection.from_dict(exported) == Connection("http://h:8000", model="m", name="lab")
    assert Connection.from_dict(conn.to_dict(redact_key=False)) == conn
    assert conn.headers() == {"Authorization": "Bearer sk-secret"}
    assert Connection("http://h").headers() == {}


def test_sampling_maps_to_the_openai_body_with_extras_only_when_on():
    msgs = [{"role": "user", "content": "hi", "token_ids": [1, 2]}]
    body = chat_body("m", msgs, sampling_of({"temperature": 0.5, "top_k": 40, "seed": 3,
                                             "stop": ["\n\n"], "max_tokens": 9}))
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert (body["temperature"], body["top_k"], body["seed"], body["stop"],
            body["max_tokens"]) == (0.5, 40, 3, ["\n\n"], 9)
    assert "min_p" not in body and "repetition_penalty" not in body
    body = chat_body("m", msgs, sampling_of({"min_p": 0.1, "repetition_penalty": 1.2}))
    assert (body["min_p"], body["repetition_penalty"]) == (0.1, 1.2)
    assert "top_k" not in body and "seed" not in body and "stop" not in body
    with pytest.raises(ValueError, match="unknown sampling field"):
        sampling_of({"temprature": 1})


STREAM_WITHOUT_MLX = """
import asyncio, sys
from app.remote import Connection, RemoteClient
from tests.remote.broken_server import API_KEY, BrokenServer

async def main():
    server = BrokenServer()
    await server.start()
    client = RemoteClient(Connection(server.url, model="ok", api_key=API_KEY))
    stream = client.submit([{"role": "user", "content": "hi"}], params={"max_tokens": 4})
    text = await stream.result()
    await client.close()
    await server.stop()
    assert stream.finish_reason == "stop" and text and stream.stats.generated_tokens == 4

asyncio.run(main())
assert "mlx" not in sys.modules, sorted(m for m in sys.modules if "mlx" in m)
"""


def test_streaming_from_a_server_needs_no_mlx():
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", STREAM_WITHOUT_MLX], check=True, cwd=root,
                   timeout=60)
