"""`python -m batchchat --cli` with a model that cannot be loaded, or a bad setting, ends with
one clear line on stderr and a non-zero exit, never a traceback (issue #15, item 8).
The real entry point, run as a process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unprivileged import unprivileged

ROOT = Path(__file__).resolve().parents[2]


def run_cli(tmp_path: Path, *args: str, privileged: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "batchchat", "--cli", *args]
    env = os.environ | {"BATCHCHAT_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run(cmd if privileged else unprivileged(cmd), capture_output=True,
                          text=True, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                          timeout=120)


def assert_one_clear_line(result: subprocess.CompletedProcess, *names: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("batchchat: error: ")
    for name in names:
        assert name in errors[0]


def test_missing_model(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "model.gguf"
    result = run_cli(tmp_path, "--model", str(missing))
    assert_one_clear_line(result, str(missing), "no such file")


def test_a_file_that_is_not_a_model(tmp_path: Path) -> None:
    bad = tmp_path / "notes.gguf"
    bad.write_text("not a model at all")
    assert_one_clear_line(run_cli(tmp_path, "--model", str(bad)), str(bad), "not a GGUF")


def test_an_unreadable_model_directory(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    model.chmod(0)
    try:
        result = run_cli(tmp_path, "--model", str(model), privileged=False)
    finally:
        model.chmod(0o755)
    assert_one_clear_line(result, str(model), "Permission denied")


@pytest.mark.parametrize(("args", "named"), [
    (["--max-tokens", "0"], "max_tokens must be >= 1"),
    (["--temperature", "nan"], "temperature must be finite"),
])
def test_a_bad_setting(tmp_path: Path, args: list[str], named: str) -> None:
    assert_one_clear_line(run_cli(tmp_path, "--model", "/nowhere.gguf", *args), named)


def test_a_line_that_is_not_utf8_is_refused_and_the_chat_goes_on(tmp_path: Path) -> None:
    """Invalid UTF-8 typed into the terminal chat (stdin decodes it to lone surrogates) is
    refused naming the character; the next line gets a reply. On the bundled model."""
    from engine.loader import bundled_model_path

    env = os.environ | {"BATCHCHAT_DATA_DIR": str(tmp_path / "data"), "LC_ALL": "C.UTF-8"}
    result = subprocess.run(
        [sys.executable, "-m", "batchchat", "--cli", "--model", str(bundled_model_path()),
         "--max-tokens", "3", "--temperature", "0"],
        input=b"hi \xff there\nhello\n", capture_output=True, cwd=ROOT, env=env, timeout=300)
    out = result.stdout.decode("utf-8", "replace")
    assert result.returncode == 0, result.stderr.decode("utf-8", "replace")
    assert "[refused: messages[0].content holds a lone surrogate (U+DCFF at character 3)" \
        in out
    assert "bot> " in out and "3 tokens" in out  # the next line was answered


@pytest.mark.parametrize(("args", "words"), [
    (["--cli", "--speculative", "fast"], "argument --speculative: speculative decoding must "
                                         "be 'off', 'ngram' or 'draft:PATH', got 'fast'"),
    (["--speculative", "ngram"], "--speculative goes with --cli"),
])
def test_a_bad_speculative_choice_is_a_usage_error(capsys, args: list[str], words: str) -> None:
    from app.main import parse_args

    with pytest.raises(SystemExit) as info:
        parse_args(args)
    assert info.value.code == 2
    assert words in capsys.readouterr().err


@pytest.mark.bundled
def test_the_terminal_chat_drafts_and_says_so(tmp_path: Path) -> None:
    """--speculative ngram reaches the engine: a copy-style ask shows its drafts' acceptance
    in the reply's stats line."""
    code = "def add(a, b):\n    total = a + b\n    return total\n" * 2
    cmd = [sys.executable, "-m", "batchchat", "--cli", "--speculative", "ngram", "--temperature",
           "0", "--max-tokens", "48"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=240,
                            env=os.environ | {"BATCHCHAT_DATA_DIR": str(tmp_path / "data")},
                            input="Repeat this code exactly: " + code.replace("\n", " ") + "\n")
    assert result.returncode == 0, result.stderr
    assert "% accepted" in result.stdout and "tokens per step" in result.stdout, result.stdout


@pytest.mark.parametrize("when", ["waiting for a line", "while a reply streams"])
def test_ctrl_c_quits_the_terminal_chat_cleanly(tmp_path: Path, when: str) -> None:
    """Ctrl+C ends the terminal chat as an empty line does: exit 0, no traceback, and no
    wait for a line first (stdin stays open, as a terminal's does)."""
    import signal
    import time

    from engine.loader import bundled_model_path

    env = os.environ | {"BATCHCHAT_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "batchchat", "--cli", "--model", str(bundled_model_path()),
         "--max-tokens", "4000"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
        # a suite started in the background may run with SIGINT ignored: the chat's default
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stderr is not None and proc.stdin is not None and proc.stdout is not None
        while "Type a message" not in proc.stderr.readline():  # loaded
            assert proc.poll() is None, "the chat ended while loading"
        if when == "while a reply streams":
            proc.stdin.write("Tell me a long story about the sea.\n")
            proc.stdin.flush()
            assert proc.stdout.read(10)  # "you> bot> " and the reply's first characters
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
        err = proc.stderr.read()
        assert code == 0, err
        assert "Traceback" not in err, err
    finally:
        proc.kill()
        proc.wait()
