"""Issue #32 item 3: `batchchat models` (list, info NAME, pull REPO) run for real, as a
subprocess, with the hub cache in a temp folder and a stand-in hub on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from mlx.utils import tree_flatten

from tests.app.hub_standin import COMMIT, HubStandIn
from tests.app.test_model_pull import free_port
from tests.tiny_model import place_in_hub_cache, save_tiny_dir

ROOT = Path(__file__).resolve().parents[2]
REPO = "test-org/tiny-llama"


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    return os.environ | {"HF_HUB_CACHE": str(tmp_path / "hub"), "HOME": str(tmp_path / "home"),
                         "BATCHCHAT_MODEL_DIR": str(tmp_path / "bc"),
                         "BATCHCHAT_DATA_DIR": str(tmp_path / "data")}


async def run(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "batchchat", "models", *args, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode, out.decode(), err.decode()


async def test_list_and_info_show_a_model_in_the_hub_cache(env, tiny, tmp_path):
    src = save_tiny_dir(tiny, tmp_path / "src", context_length=2048)
    snapshot = place_in_hub_cache(src, tmp_path / "hub", REPO)
    (tmp_path / "hub" / "models--test-org--broken" / "snapshots" / COMMIT).mkdir(parents=True)
    (tmp_path / "hub" / "models--test-org--broken" / "snapshots" / COMMIT / "config.json") \
        .write_text("{}")
    code, out, err = await run(env)  # `list` is the default
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "ARCH", "PARAMS", "QUANT", "SIZE", "CONTEXT", "LOADS",
                                "WHERE", "INPUT"]
    row = next(line for line in lines if line.startswith(REPO + " ")).split()
    params = sum(v.size for _, v in tree_flatten(tiny.model.parameters()))
    assert row[1:4] == ["llama", f"{params / 1000:.0f}K", "f32"]
    assert row[-5:] == ["2K", "yes", "Hugging", "Face", "text"]
    broken = next(line for line in lines if line.startswith("test-org/broken "))
    assert " no " in broken
    assert any("test-org/broken: missing weights" in line or "no model_type" in line
               for line in lines[lines.index("Not loadable here:"):])

    code, out, _ = await run(env, "list", "--json")
    rows = {r["name"]: r for r in map(json.loads, out.splitlines())}
    assert rows[REPO]["source"] == str(snapshot) and rows[REPO]["context_length"] == 2048

    code, out, err = await run(env, "info", "tiny-llama")
    assert code == 0, err
    fields = dict(line.split(":", 1) for line in out.splitlines())
    assert fields["Path"].strip() == str(snapshot)
    assert fields["Load with"].strip() == f"batchchat --model {snapshot}"
    assert fields["Architecture"].strip() == "llama" and fields["Loads here"].strip() == "yes"
    assert fields["Context length"].strip() == "2,048"

    code, _, err = await run(env, "info", "no-such-model")
    assert code == 1 and "no model called 'no-such-model'" in err
    code, _, err = await run(env, "info", "test-org")
    assert code == 1 and "could be any of" in err  # two models match: say which
    code, _, err = await run(env, "frobnicate")
    assert code == 2 and "invalid choice" in err


async def test_pull_shows_progress_and_the_model_is_then_listed(env, tiny, tmp_path):
    hub = HubStandIn.from_dir(REPO, save_tiny_dir(tiny, tmp_path / "src"))
    await hub.start()
    try:
        code, out, err = await run(env | {"HF_ENDPOINT": hub.url}, "pull", REPO)
    finally:
        await hub.stop()
    assert code == 0, err
    progress = err.splitlines()
    assert len(progress) >= len(hub.files) and "model.safetensors" in err
    assert progress[-1].startswith("100%")
    snapshot = tmp_path / "hub" / "models--test-org--tiny-llama" / "snapshots" / COMMIT
    assert f"Load it with: batchchat --model {snapshot}" in out
    code, out, _ = await run(env, "info", REPO)
    assert "Loads here:     yes" in out


async def test_pull_from_an_unreachable_hub_fails_clearly(env, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    code, out, err = await run(env | {"HF_ENDPOINT": url}, "pull", REPO)
    assert code == 1 and out == ""
    assert err.startswith(f"batchchat models: cannot reach the Hugging Face hub at {url}")
    assert "Traceback" not in err
    code, out, _ = await run(env, "list")
    assert REPO not in out


async def test_pull_from_a_hub_that_never_answers_fails_in_bounded_time(env):
    """Issue #46 item 7: the hub takes the connection and says nothing."""
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # read nothing, answer nothing, keep it open

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        code, out, err = await run(env | {"HF_ENDPOINT": f"http://127.0.0.1:{port}",
                                          "HF_HUB_ETAG_TIMEOUT": "1"}, "pull", REPO)
    finally:
        for writer in held:
            writer.close()
        server.close()
    assert code == 1 and out == ""
    assert err.strip().splitlines() == [
        f"batchchat models: cannot reach the Hugging Face hub at http://127.0.0.1:{port} "
        "(no answer within 1 s); check the network connection (or HF_ENDPOINT). "
        "Nothing was downloaded."]
