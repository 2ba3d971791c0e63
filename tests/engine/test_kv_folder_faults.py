"""A KV-cache folder the engine cannot write, and files in it it cannot read (issue #28):
the folder is named as not writable once, not with MLX's "Failed to open file
…partial.safetensors"; `save_prefix` returns 0 as its docs say instead of raising; a file
that cannot be read is renamed `.corrupt`, so it is warned about once, not at every start.
Real files; the read-only folder in a process without root's power to ignore it."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

from tests.engine.conftest import prompts, reference_tokens
from tests.engine.test_prefix_store import N, engine_on, finish, first_turn_saved
from tests.unprivileged import unprivileged

ROOT = Path(__file__).resolve().parents[2]


def test_a_read_only_kv_folder_is_named_once_and_save_prefix_returns_0(tmp_path) -> None:
    kv_dir = tmp_path / "kv-cache"
    cmd = unprivileged([sys.executable, "-m", "tests.engine.kv_read_only_run", str(kv_dir)])
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.splitlines()[-1])
    said = f"KV cache folder {kv_dir} is not writable (Permission denied)"

    at_start = out["log_read_only_at_start"]
    assert at_start.count(said) == 1, at_start
    assert "new ones are not saved" in at_start
    assert out["cached_from_disk"] == out["history_len"] - 1  # its files are still read
    assert out["saves_at_start_read_only"] == [0, 0]

    later = out["log_made_read_only"]
    assert out["saves_after_made_read_only"] == [0, 0]  # not raised
    assert later.count(said) == 1, later
    assert "no longer saved across restarts" in later
    for log in (at_start, later):
        assert "Failed to open file" not in log and "partial" not in log
    [only] = out["files"]  # the one saved while writable; no leftovers
    assert only.endswith(".safetensors") and not only.endswith(".partial.safetensors")


async def test_an_unreadable_file_is_renamed_and_warned_about_once(tiny, tmp_path,
                                                                   caplog) -> None:
    await first_turn_saved(tiny, tmp_path)
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    (tmp_path / "empty.safetensors").write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="engine.prefix_store"):
        engine_on(tiny, tmp_path)
    assert caplog.text.count("ignoring KV cache file") == 2
    assert "renamed to junk.safetensors.corrupt" in caplog.text
    assert (tmp_path / "junk.safetensors.corrupt").read_bytes() == b"not a safetensors file"
    assert (tmp_path / "empty.safetensors.corrupt").exists()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="engine.prefix_store"):
        restarted = engine_on(tiny, tmp_path)  # the next start: nothing to say
    assert "ignoring KV cache file" not in caplog.text
    assert restarted.stats().prefix_disk_files == 1  # the good file is still used
    prompt = prompts(4, seed=44)[3]
    assert finish(restarted, prompt).tokens == reference_tokens(tiny.model, prompt, N)
