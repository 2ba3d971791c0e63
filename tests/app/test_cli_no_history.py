"""`--cli` keeps no history: `--cli --db PATH` is a usage error (exit 2) that says so,
rather than a --db accepted and nothing saved, and `--help` says it (issue #28). The real
entry point, run as a process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_app(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = os.environ | {"BATCHCHAT_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run([sys.executable, "-m", "batchchat", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, timeout=120)


def test_db_with_cli_is_refused_saying_cli_keeps_no_history(tmp_path: Path) -> None:
    db = tmp_path / "chats.db"
    result = run_app(tmp_path, "--cli", "--db", str(db), "--model", "/nowhere.gguf")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("batchchat: error: ") and "--db" in last
    assert "keeps no history" in last
    assert result.stdout == "" and not db.exists() and not (tmp_path / "data").exists()


def test_help_says_cli_keeps_no_history(tmp_path: Path) -> None:
    result = run_app(tmp_path, "--help")
    assert result.returncode == 0
    options = result.stdout.split("options:", 1)[1]
    cli_help = options.split("  --cli", 1)[1].split("\n  --", 1)[0]  # up to the next option
    assert "keeps no history" in " ".join(cli_help.split())
