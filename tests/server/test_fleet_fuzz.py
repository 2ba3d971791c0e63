"""tests/server/test_fuzz.py's property-based fuzzing, on a server of several models (issue
#50): every operation of its own /openapi.json, the load / unload / running paths and a TTL
per request included, checked the same way; afterwards it is healthy and answers. One test
per operation, as test_fuzz.py, so xdist spreads them; a worker's operations share one server.
Each operation that generates must have had cases its engines served (test_fuzz.py's count).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from app.fleet import Catalog, ModelManager
from app.models.library import folder_models
from app.server import ApiServer, ServerConfig, fleet_openapi, openapi
from app.server.fleet_api import FleetApi
from tests.fleet_models import tiny_gguf
from tests.server.test_fuzz import (
    ENGINE_OPERATIONS,
    EngineServed,
    floor_applies,
    fuzz_operation,
    operation_names,
    served_operations,
)

NEW_PATHS = {"/models", "/models/running", "/models/load", "/models/unload"}


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fleet-fuzz")
    for i, name in enumerate("ab"):
        tiny_gguf(d / f"tiny-{name}.gguf", seed=i)
    return d


@contextmanager
def fleet_thread(folder: Path, on_finished: EngineServed | None = None) -> Iterator[str]:
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
                           fleet=api, on_finished=on_finished)
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


# the fleet's document as it serves it (the model names only narrow `model`'s values)
OPERATIONS = operation_names(fleet_openapi.extend(openapi.document(), []))


SERVED = EngineServed()  # what the module's server's engines served (one server per worker)


@pytest.fixture(scope="module")
def fleet_url(models_dir: Path) -> Iterator[str]:
    with fleet_thread(models_dir, SERVED) as url:
        yield url


def test_every_operation_of_the_served_document_is_fuzzed(fleet_url):
    assert NEW_PATHS <= {name.split(" ", 1)[1] for name in OPERATIONS}
    assert sorted(served_operations(fleet_url)) == sorted(OPERATIONS)


@pytest.mark.parametrize("name", OPERATIONS)
def test_fuzz_an_operation_of_a_server_of_several_models(fleet_url, name):
    before = SERVED.now()
    fuzz_operation(served_operations(fleet_url)[name], fleet_url)
    served = SERVED.now() - before
    print(f"{name}: {served} engine requests served")
    if name in ENGINE_OPERATIONS and floor_applies():
        assert served > 0, f"no case of {name} reached an engine"
    assert requests.get(fleet_url + "/health", timeout=10).json() == {"status": "ok"}
    r = requests.post(fleet_url + "/v1/chat/completions", timeout=60, json={
        "model": "tiny-b", "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 4, "keep_alive": "5m"})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] <= 4
    assert r.json()["model"] == "tiny-b"
