"""Issue #32: pulling a model by repo id from a stand-in hub on loopback (the hub's URL
layout, tests/app/hub_standin.py): it lands in the hub cache, the library lists it and the
app's loader loads it; a pull cut off mid-file resumes without fetching those bytes again;
a hub that cannot be reached is a clear message and leaves nothing listed."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
from pathlib import Path

import pytest

from app.bridge import BridgeState, EngineBridge
from app.models.hub_cache import hub_models
from app.models.pull import PullCancelled, PullError, PullProgress, pull
from engine import SamplingParams
from tests.app.hub_standin import COMMIT, HubStandIn
from tests.engine.conftest import reference_tokens
from tests.tiny_model import save_tiny_dir

REPO = "test-org/tiny-llama"


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, tiny) -> Path:
    return save_tiny_dir(tiny, tmp_path_factory.mktemp("tiny") / "tiny-llama")


@pytest.fixture
async def hub(tiny_dir):
    server = HubStandIn.from_dir(REPO, tiny_dir)
    await server.start()
    yield server
    await server.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_pull_lands_in_the_hub_cache_is_listed_and_loads(hub, tiny_dir, tiny,
                                                                 tmp_path):
    cache = tmp_path / "hub"
    seen: list[PullProgress] = []
    snapshot = await asyncio.to_thread(pull, REPO, cache_dir=cache, endpoint=hub.url,
                                       progress=seen.append)
    assert snapshot == cache / "models--test-org--tiny-llama" / "snapshots" / COMMIT
    for name, data in hub.files.items():
        assert (snapshot / name).is_symlink() and (snapshot / name).read_bytes() == data
    assert (snapshot.parents[1] / "refs" / "main").read_text() == COMMIT
    total = sum(len(d) for d in hub.files.values())
    assert hub.sent == {name: len(d) for name, d in hub.files.items()}  # each byte once
    done = [p.bytes_done for p in seen]
    assert done == sorted(done) and seen[-1].bytes_done == seen[-1].bytes_total == total
    assert seen[-1].files_done == len(hub.files)

    [entry] = hub_models(cache)
    assert (entry.name, entry.place, entry.source) == (REPO, "Hugging Face", str(snapshot))
    a = tiny.model.args
    assert entry.loads and entry.architecture == "llama" and entry.context_length == 512
    assert entry.quantization == "f32" and entry.size_bytes == total
    assert entry.parameters == sum(v.size for _, v in _leaves(tiny.model))
    assert a.vocab_size * a.hidden_size * 2 < entry.parameters

    bridge = EngineBridge()  # the app's own loader: engine.loader through LocalTarget
    try:
        assert await bridge.load(entry.source), bridge.load_error
        assert bridge.state == BridgeState.READY and bridge.source == entry.source
        prompt = [5, 40, 41, 42]
        stream = bridge.local.submit(prompt_tokens=prompt,
                                     params=SamplingParams(temperature=0.0, max_tokens=10))
        await stream.result()
        assert stream.tokens == reference_tokens(tiny.model, prompt, 10)
    finally:
        await bridge.shutdown()


def _leaves(model):
    from mlx.utils import tree_flatten

    return tree_flatten(model.parameters())


async def test_a_pull_cut_off_mid_file_resumes_where_it_stopped(hub, tmp_path):
    cache = tmp_path / "hub"
    weights = hub.files["model.safetensors"]
    half = len(weights) // 2
    hub.cut_after["model.safetensors"] = half
    with pytest.raises(PullError, match="stopped at") as failed:
        await asyncio.to_thread(pull, REPO, cache_dir=cache, endpoint=hub.url)
    assert "pull it again to resume" in str(failed.value)
    blob = cache / "models--test-org--tiny-llama" / "blobs" / hashlib.sha256(weights).hexdigest()
    part = blob.with_name(blob.name + ".incomplete")
    assert part.stat().st_size == half and not blob.exists()
    [entry] = hub_models(cache)  # listed as what it is: not a model that loads yet
    assert not entry.loads and "download incomplete" in entry.reason

    snapshot = await asyncio.to_thread(pull, REPO, cache_dir=cache, endpoint=hub.url)
    assert hub.ranges == [f"bytes={half}-"]
    assert hub.sent["model.safetensors"] == len(weights)  # half, then the other half
    assert (snapshot / "model.safetensors").read_bytes() == weights and not part.exists()
    [entry] = hub_models(cache)
    assert entry.loads, entry.reason


async def test_cancel_keeps_what_arrived_for_the_next_pull(hub, tmp_path):
    cache = tmp_path / "hub"
    cancel = threading.Event()

    def progress(p: PullProgress) -> None:
        if p.file == "model.safetensors" and p.bytes_done:
            cancel.set()

    hub.files["model.safetensors"] += b""  # same bytes; the flag stops it after a chunk
    with pytest.raises(PullCancelled, match="cancelled"):
        await asyncio.to_thread(pull, REPO, cache_dir=cache, endpoint=hub.url,
                                progress=progress, cancel=cancel)
    cancel.clear()
    await asyncio.to_thread(pull, REPO, cache_dir=cache, endpoint=hub.url)
    [entry] = hub_models(cache)
    assert entry.loads, entry.reason


async def test_an_unreachable_hub_is_a_clear_message_and_nothing_is_listed(tmp_path):
    cache = tmp_path / "hub"
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(PullError) as failed:
        await asyncio.to_thread(pull, REPO, cache_dir=cache, endpoint=url)
    message = str(failed.value)
    assert message.startswith(f"cannot reach the Hugging Face hub at {url}")
    assert "Nothing was downloaded" in message and "Traceback" not in message
    assert not cache.exists() and list(hub_models(cache)) == []


async def test_an_unknown_repo_and_a_bad_repo_id_say_so(hub, tmp_path):
    with pytest.raises(PullError, match="not a Hugging Face repo id"):
        pull("no slash here", cache_dir=tmp_path, endpoint=hub.url)
    with pytest.raises(PullError, match="no such model repo"):
        await asyncio.to_thread(pull, "test-org/other", cache_dir=tmp_path, endpoint=hub.url)
    assert list(hub_models(tmp_path)) == []


async def test_a_gguf_repo_takes_one_quantization_named_as_ollama_names_it(tmp_path):
    files = {"config.json": b"{}", "tiny.Q4_0.gguf": b"q4" * 1000,
             "tiny.Q8_0.gguf": b"q8" * 2000, "tiny.F16.gguf": b"f16" * 3000}
    hub = HubStandIn("test-org/tiny-GGUF", files)
    await hub.start()
    try:
        with pytest.raises(PullError) as several:
            await asyncio.to_thread(pull, "test-org/tiny-GGUF", cache_dir=tmp_path,
                                    endpoint=hub.url)
        assert "has 3 .gguf files; name one, e.g. test-org/tiny-GGUF:F16" in str(several.value)
        assert ("(quantizations: F16 8.8 KiB, Q4_0 2.0 KiB, Q8_0 3.9 KiB)"
                in str(several.value)), several.value
        assert sum(hub.sent.values()) == 0
        assert not (tmp_path / "models--test-org--tiny-GGUF").exists()
        with pytest.raises(PullError, match="no .gguf file matches 'Q5_K'"):
            await asyncio.to_thread(pull, "test-org/tiny-GGUF:Q5_K", cache_dir=tmp_path,
                                    endpoint=hub.url)
        snapshot = await asyncio.to_thread(pull, "test-org/tiny-GGUF:q8_0", cache_dir=tmp_path,
                                           endpoint=hub.url)
    finally:
        await hub.stop()
    assert sorted(p.name for p in snapshot.iterdir()) == ["config.json", "tiny.Q8_0.gguf"]
    assert hub.sent == {"config.json": 2, "tiny.Q4_0.gguf": 0, "tiny.Q8_0.gguf": 4000,
                        "tiny.F16.gguf": 0}
