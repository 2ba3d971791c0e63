"""A streamed completion whose model is still loading sees the load's progress in its own
stream (issue #50, app/server/load_stream.py): SSE comment lines a raw reader parses and the
official `openai` client ignores; a load that fails after the stream began is the stream's
error event; a refusal before the load began is still a status."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from engine.public import ModelLoadError
from tests.fleet_models import bundled_path, tiny_gguf
from tests.server.test_fleet_api import HELLO, alone, fleet_server


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fleet-load-stream")
    (d / "smol.gguf").symlink_to(bundled_path())
    tiny_gguf(d / "tiny-a.gguf", seed=0)
    return d


async def raw_stream(f, body: dict) -> tuple[int, list[str]]:
    """The status and the stream's lines (blank lines left out), read with aiohttp."""
    async with f.http.post(f.url + "/v1/chat/completions", json=body) as r:
        lines = [line.decode().rstrip("\n") async for line in r.content]
        return r.status, [line for line in lines if line]


async def test_a_raw_reader_sees_the_load_progress_before_the_first_chunk(models_dir):
    params = {"max_tokens": 16, "temperature": 0.0}
    expected = await alone(models_dir / "smol.gguf", HELLO, **params)
    async with fleet_server(models_dir) as f:
        status, lines = await raw_stream(f, {"model": "smol", "messages": HELLO,
                                             "stream": True, **params})
        assert status == 200
        loading = [json.loads(line.removeprefix(": loading ")) for line in lines
                   if line.startswith(": loading ")]
        assert loading, lines[:5]
        assert {p["model"] for p in loading} == {"smol"}
        fractions = [p["progress"] for p in loading]
        assert fractions == sorted(fractions) and fractions[-1] == 1.0
        # every comment comes before the first chunk, the last says the model is loaded
        first_data = next(i for i, line in enumerate(lines) if line.startswith("data: "))
        assert all(not line.startswith(":") for line in lines[first_data:])
        assert lines[first_data - 1] == ': loaded {"model":"smol"}'
        chunks = [json.loads(line[6:]) for line in lines[first_data:] if line != "data: [DONE]"]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks
                       if c["choices"])
        assert text == expected and lines[-1] == "data: [DONE]"
        # once loaded, a stream has no comment at all
        status, again = await raw_stream(f, {"model": "smol", "messages": HELLO,
                                             "stream": True, **params})
        assert status == 200 and not any(line.startswith(":") for line in again)


async def test_the_openai_client_ignores_the_progress_lines(models_dir):
    params = {"max_tokens": 24, "temperature": 0.8, "seed": 3}
    expected = await alone(models_dir / "tiny-a.gguf", HELLO, **params)
    async with fleet_server(models_dir) as f:
        reports: list[float] = []
        f.fleet.load_progress.connect(lambda name, _stage, fraction: reports.append(fraction))
        stream = await f.client.chat.completions.create(model="tiny-a", messages=HELLO,
                                                        stream=True, **params)
        text = "".join([c.choices[0].delta.content or "" async for c in stream
                        if c.choices])
        assert text == expected
        assert reports and reports[-1] == 1.0  # each report was a comment line of the stream


async def test_a_load_failing_after_the_stream_began_is_its_error_event(models_dir):
    def broken(source: str, progress=None):
        progress("weights", 0.5)
        raise ModelLoadError(f"{source}: the file ends early")

    async with fleet_server(models_dir, loader=broken) as f:
        status, lines = await raw_stream(f, {"model": "tiny-a", "messages": HELLO,
                                             "stream": True})
        assert status == 200 and lines[0].startswith(": loading ")
        error = json.loads(lines[-2][6:])["error"]
        assert "could not load the model 'tiny-a'" in error["message"]
        assert "the file ends early" in error["message"] and lines[-1] == "data: [DONE]"
        with pytest.raises(openai.APIError, match="the file ends early"):
            stream = await f.client.chat.completions.create(model="tiny-a", messages=HELLO,
                                                            stream=True)
            async for _ in stream:
                pass
        # an unknown model is refused before any load: a status, as before
        status, lines = await raw_stream(f, {"model": "nope", "messages": HELLO,
                                             "stream": True})
        assert status == 404 and "tiny-a" in json.loads(lines[0])["error"]["message"]


async def test_the_anthropic_path_reports_a_failed_load_as_its_error_event(models_dir):
    def broken(source: str, progress=None):
        progress("weights", 0.5)
        raise ModelLoadError("no room on the disk")

    async with fleet_server(models_dir, loader=broken) as f:
        async with f.http.post(f.url + "/v1/messages", json={
                "model": "tiny-a", "max_tokens": 8, "stream": True,
                "messages": [{"role": "user", "content": "Hi"}]}) as r:
            lines = [line.decode().strip() async for line in r.content]
        lines = [line for line in lines if line]
        assert r.status == 200 and lines[0].startswith(": loading ")
        assert lines[-2] == "event: error"
        assert "no room on the disk" in json.loads(lines[-1][6:])["error"]["message"]



async def test_the_responses_path_refused_after_its_load_is_its_error_event(models_dir):
    """A Responses stream refused once its model loaded (an input of reasoning items only)
    ends with the Responses API's own `error` event, as the stream's events are typed and
    numbered (the fuzz test's schema found a bare {"error": …} there)."""
    body = {"model": "tiny-a", "stream": True,
            "input": [{"type": "reasoning", "summary": [], "content": []}]}
    async with fleet_server(models_dir) as f:
        async with f.http.post(f.url + "/v1/responses", json=body) as r:
            lines = [line.decode().strip() async for line in r.content]
        lines = [line for line in lines if line]
        assert r.status == 200 and lines[0].startswith(": loading "), lines[:3]
        assert lines[-2] == "event: error", lines[-3:]
        event = json.loads(lines[-1][6:])
        assert event["type"] == "error" and event["sequence_number"] == 0
        assert event["code"] == "invalid_request" and event["param"] == "input"
        assert "only reasoning items" in event["message"]
        # loaded now: the same body is a status before any stream
        status, again = 0, b""
        async with f.http.post(f.url + "/v1/responses", json=body) as r:
            status, again = r.status, await r.read()
        assert status == 400 and "only reasoning items" in json.loads(again)["error"]["message"]


async def test_the_openai_client_reads_a_failed_load_of_a_responses_stream(models_dir):
    def broken(source: str, progress=None):
        progress("weights", 0.5)
        raise ModelLoadError("the file ends early")

    async with fleet_server(models_dir, loader=broken) as f:
        stream = await f.client.responses.create(model="tiny-a", input="Hi", stream=True)
        events = [event async for event in stream]
        assert [e.type for e in events] == ["error"]
        assert "the file ends early" in events[0].message and events[0].sequence_number == 0
