"""BATCHCHAT_KV_BUDGET_MB with a value it does not take: one line naming it and exit 2 from
`--cli` and `serve`, before any model loads (issue #28). Real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", [["--cli"], ["serve", "--port", "0"]])
def test_a_bad_kv_budget_variable_is_one_line_and_exit_2(tmp_path: Path, command) -> None:
    env = os.environ | {"BATCHCHAT_DATA_DIR": str(tmp_path), "BATCHCHAT_KV_BUDGET_MB": "lots",
                        "BATCHCHAT_API_KEY": ""}
    result = subprocess.run([sys.executable, "-m", "batchchat", *command, "--model",
                             str(tmp_path / "never-loaded.gguf")],
                            capture_output=True, text=True, cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    [line] = [x for x in result.stderr.splitlines() if "BATCHCHAT_KV_BUDGET_MB" in x]
    assert "'lots'" in line and "MiB" in line
    # refused before the (missing) model was looked at
    assert "no such file" not in result.stderr.lower()
