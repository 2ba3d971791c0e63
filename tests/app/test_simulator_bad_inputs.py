"""Bad settings for the load simulator: NaN, infinity and values of the wrong kind are
refused naming the setting, and the headless CLI ends with one `error:` line instead of
a traceback (a templates file that is not UTF-8, a concurrency the engine cannot take, a
--json folder that does not exist, a --save database that cannot be opened)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.simulator.config import SimConfig, SimConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("change", "words"), [
    ({"rate": float("nan")}, "rate must be a finite number, got nan"),
    ({"uniform_high_s": float("inf")}, "uniform_high_s must be a finite number, got inf"),
    ({"burst_every_s": float("inf")}, "burst_every_s must be a finite number"),
    ({"temperature": "hot"}, "temperature must be a finite number, got 'hot'"),
    ({"burst_size": 2.5}, "burst_size must be a whole number, got 2.5"),
    ({"num_requests": "20"}, "num_requests must be a whole number"),
    ({"templates": "one {topic}"}, "Templates and topics must be lists of text"),
])
def test_odd_values_are_refused_naming_the_setting(change, words):
    with pytest.raises(SimConfigError, match=words):
        SimConfig.from_dict(change).validate()


def run(tmp_path: Path, *args: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"BATCHCHAT_DATA_DIR": str(tmp_path / "data")} | env_vars
    return subprocess.run([sys.executable, "-m", "app.simulator", "--model", "/nowhere.gguf",
                           *args], capture_output=True, text=True, cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL, timeout=120)


def test_cli_bad_inputs_end_in_one_error_line(tmp_path: Path) -> None:
    from app.backend.local_target import max_concurrent_limit

    latin = tmp_path / "templates.txt"
    latin.write_bytes("caf\xe9 {topic}\n".encode("latin-1"))
    folder = tmp_path / "a-folder.db"
    folder.mkdir()
    cases = [
        (["--templates", str(latin)], f"--templates {latin}: not UTF-8 text"),
        (["--concurrency", "100000"],
         f"--concurrency: must be from 1 to {max_concurrent_limit()}, got 100000"),
        (["--json", str(tmp_path / "missing" / "out.json")], "the folder"),
        (["--save", "--db", str(folder)], f"--save: The history database at {folder}"),
    ]
    for args, words in cases:
        result = run(tmp_path, *args)
        assert result.returncode != 0, args
        assert "Traceback" not in result.stderr, result.stderr
        errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and words in errors[0], (args, result.stderr)


def test_a_bad_kv_budget_variable_is_named_not_blamed_on_concurrency(tmp_path: Path) -> None:
    result = run(tmp_path, BATCHCHAT_KV_BUDGET_MB="lots")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert errors == ["error: BATCHCHAT_KV_BUDGET_MB='lots': use a positive number of MiB "
                      "(docs/environment.md)"], result.stderr
