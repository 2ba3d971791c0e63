"""`batchchat serve` as a real process, given a model it cannot load or a bad option: one
clear line on stderr and a non-zero exit, never a traceback (issue #28)."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = os.environ | {"BATCHCHAT_DATA_DIR": str(tmp_path / "data"), "BATCHCHAT_API_KEY": ""}
    return subprocess.Popen([sys.executable, "-m", "batchchat", "serve", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=env, stdin=subprocess.DEVNULL)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:  # it served instead of refusing
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


def one_error_line(err: str) -> str:
    assert "Traceback" not in err, err
    errors = [ln for ln in err.splitlines() if "error" in ln.lower()]
    assert len(errors) == 1, err
    return errors[0]


def bad_models(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name -> (the path given as --model, words its error must hold)."""
    files = {  # name -> (contents, words)
        "empty": (b"", "empty"),
        "random": (os.urandom(4096).replace(b"GGUF", b"XXXX"), "not a GGUF"),
        # version 0, no tensors, no metadata
        "zero-header": (b"GGUF" + bytes(20), "GGUF version 0 is not supported"),
        # a GGUF v3 header that promises 3 tensors and 5 metadata entries, then ends
        "truncated": (b"GGUF" + struct.pack("<IQQ", 3, 3, 5) + b"\x05\x00",
                      "truncated or corrupt"),
    }
    out = {}
    for name, (data, words) in files.items():
        out[name] = (tmp_path / f"{name}.gguf", words)
        out[name][0].write_bytes(data)
    unknown = tmp_path / "unknown-arch"
    unknown.mkdir()
    (unknown / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    header = b"{}      "  # a safetensors file with no tensors: the architecture is checked
    (unknown / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    # the model library's words (engine/loader/support.py), at load time too (issue #46)
    out["unknown architecture"] = (unknown,
                                   "mlx-lm has no model for model_type 'no-such-architecture'")
    out["missing"] = (tmp_path / "nowhere" / "model.gguf", "no such file")
    return out


def test_a_model_that_cannot_be_loaded_is_one_line_and_exit_1(tmp_path: Path) -> None:
    models = bad_models(tmp_path)
    procs = {name: start(tmp_path, "--model", str(path)) for name, (path, _) in models.items()}
    for name, proc in procs.items():  # all at once: each loads MLX first
        code, err = finish(proc)
        path, words = models[name]
        assert code == 1, (name, err)
        line = one_error_line(err)
        assert line.startswith("batchchat serve: error: cannot load the model: "), (name, err)
        assert str(path) in line and words in line, (name, line)


@pytest.mark.bundled
def test_a_cut_copy_of_the_bundled_model_is_one_line_and_exit_1(tmp_path: Path) -> None:
    from engine.loader import bundled_model_path

    cut = tmp_path / "cut.gguf"
    with bundled_model_path().open("rb") as f:
        cut.write_bytes(f.read(1 << 20))
    code, err = finish(start(tmp_path, "--model", str(cut)))
    assert code == 1
    assert "truncated" in one_error_line(err)


@pytest.mark.parametrize(("args", "words"), [
    (["--port", "-1"], "argument --port: must be from 0 to 65535, got -1"),
    (["--port", "70000"], "argument --port: must be from 0 to 65535, got 70000"),
    (["--port", "http"], "argument --port: not a whole number: 'http'"),
    (["--max-concurrent", "100000"], "argument --max-concurrent: must be from 1 to "),
    (["--max-concurrent", "0"], "argument --max-concurrent: must be at least 1, got 0"),
    (["--max-queue", "-5"], "argument --max-queue: must be at least 0, got -5"),
    (["--max-body-mb", "nan"], "argument --max-body-mb: must be a number > 0, got nan"),
    (["--kv-budget-mb", "0"], "argument --kv-budget-mb: must be a number > 0, got 0"),
    (["--kv-bits", "5"], "argument --kv-bits: invalid choice: 5"),
    (["--speculative", "fast"], "argument --speculative: speculative decoding must be "
                                "'off', 'ngram' or 'draft:PATH', got 'fast'"),
    (["--speculative", "draft:"], "argument --speculative: draft: needs the draft model's "
                                  "path"),
])
def test_a_bad_option_is_a_usage_error_naming_it(tmp_path: Path, args: list[str],
                                                 words: str) -> None:
    """Refused before any model loads (the model given does not exist), in the option's
    own terms: never an internal name like EngineConfig.max_token_budget."""
    code, err = finish(start(tmp_path, "--model", "/nowhere.gguf", *args))
    assert code == 2
    line = one_error_line(err)
    assert line.startswith("batchchat serve: error: ") and words in line, err
    assert "EngineConfig" not in err and "usage: batchchat serve" in err


@pytest.mark.parametrize(("host", "words"), [
    ("999.1.1.1", "cannot listen on '999.1.1.1': not an IP address or a name"),
    ("192.0.2.1", "cannot listen on 192.0.2.1:0: no network interface"),  # TEST-NET-1
])
def test_an_address_it_cannot_listen_on_is_refused_before_the_load(tmp_path: Path, host: str,
                                                                   words: str) -> None:
    """Issue #46 item 11: one line naming the address, and no model loaded first."""
    code, err = finish(start(tmp_path, "--host", host, "--api-key", "k"))
    assert code == 2
    assert words in one_error_line(err)
    assert "Loading" not in err


def test_a_port_in_use_is_refused_before_the_load(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "-m", "batchchat", "serve", "--port", str(port)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env=os.environ | {"BATCHCHAT_DATA_DIR": str(tmp_path / "data"),
                              "BATCHCHAT_API_KEY": ""}, stdin=subprocess.DEVNULL)
        code, err = finish(proc)
    assert code == 2
    assert f"port {port} is in use" in one_error_line(err)
    assert "Loading" not in err
