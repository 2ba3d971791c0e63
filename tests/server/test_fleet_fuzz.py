"""tests/server/test_fuzz.py's property-based fuzzing, on a server of several models (issue
#50): every operation of its own /openapi.json, the load / unload / running paths and a TTL
per request included, checked the same way; afterwards it is healthy and answers."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
import schemathesis
from schemathesis import GenerationMode

from app.fleet import Catalog, ModelManager
from app.models.library import folder_models
from app.server import ApiServer, ServerConfig
from app.server.fleet_api import FleetApi
from tests.fleet_models import tiny_gguf
from tests.server.test_fuzz import ENV, FUZZ_EXAMPLES, fuzz

NEW_PATHS = {"/models", "/models/running", "/models/load", "/models/unload"}


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fleet-fuzz")
    for i, name in enumerate("ab"):
        tiny_gguf(d / f"tiny-{name}.gguf", seed=i)
    return d


@contextmanager
def fleet_thread(folder: Path) -> Iterator[str]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fuzz-fleet", daemon=True)
    thread.start()

    def run(coro):
        return asyncio.run_coroutine_threadsafe(coro, loop).result(120)

    async def start() -> tuple[ApiServer, ModelManager, str]:
        fleet = ModelManager(Catalog(lambda: folder_models(folder)), kv_budget_bytes=16 << 20,
                             max_concurrent=8, reap_interval_s=0.1)
        fleet.start()
        api = FleetApi(fleet)
        server = ApiServer(api.target, api.model_id, ServerConfig(port=0, default_max_tokens=8),
                           fleet=api)
        return server, fleet, await server.start()

    server, fleet, url = run(start())
    try:
        yield url
    finally:
        run(server.stop())
        run(fleet.close())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_fuzz_every_operation_of_a_server_of_several_models(models_dir):
    more = os.environ.get(ENV)
    examples, derandomize = (int(more), False) if more else (FUZZ_EXAMPLES, True)
    with fleet_thread(models_dir) as url:
        schema = schemathesis.openapi.from_url(url + "/openapi.json")
        operations = [result.ok() for result in schema.get_all_operations()]
        assert NEW_PATHS <= {op.path for op in operations}
        for operation in operations:
            fuzz(operation, GenerationMode.POSITIVE, url, examples, derandomize)
            if operation.method.lower() == "post":
                fuzz(operation, GenerationMode.NEGATIVE, url, examples, derandomize)
        assert requests.get(url + "/health", timeout=10).json() == {"status": "ok"}
        r = requests.post(url + "/v1/chat/completions", timeout=60, json={
            "model": "tiny-b", "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": 4, "keep_alive": "5m"})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] <= 4
        assert r.json()["model"] == "tiny-b"
