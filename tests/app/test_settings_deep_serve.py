"""Issue #46 item 8 names three entry points that a settings.json nested past the parser's
depth stopped with a RecursionError: the app, `serve` and `models list`.
test_settings_file runs `models list`; this runs `batchchat serve` for real (a subprocess)
without --model, so it reads the model from settings.json: it must set the file aside and
go on to load the default model, not die with a traceback. It is stopped once it says
what it loads (the load itself is not this test's)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEEP = b"[" * 100_000 + b"]" * 100_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_without_a_model_sets_a_deep_settings_file_aside_and_goes_on(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "settings.json").write_bytes(DEEP)
    env = os.environ | {"BATCHCHAT_DATA_DIR": str(data), "HOME": str(tmp_path / "home"),
                        "HF_HUB_CACHE": str(tmp_path / "hub"),
                        "BATCHCHAT_MODEL_DIR": str(tmp_path / "bc")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "batchchat", "serve", "--port", str(_free_port())],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    watchdog = threading.Timer(120, proc.kill)  # a silent hang ends the read below
    watchdog.start()
    try:
        assert proc.stderr is not None
        while True:
            line = proc.stderr.readline()
            if not line:  # it ended: whatever it said is the failure
                break
            lines.append(line)
            if line.startswith("Loading "):
                break
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    said = "".join(lines)
    assert any(line.startswith("Loading ") for line in lines), said
    assert "Traceback" not in said and "RecursionError" not in said, said
    assert len(list(data.glob("settings.json.corrupt-*"))) == 1
