"""tests/cpu_times.py: a test's CPU seconds are told apart from its waiting, its children's
CPU counted, one line a test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SAMPLE = '''
import subprocess, sys, time

def test_busy():
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass

def test_waits():
    time.sleep(0.3)

def test_child():
    subprocess.run([sys.executable, "-c",
                    "import time\\nend = time.process_time() + 0.3\\n"
                    "while time.process_time() < end: pass"], check=True)
'''


def test_each_tests_cpu_and_wall(tmp_path):
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    log = tmp_path / "cpu.jsonl"
    env = dict(os.environ, BATCHCHAT_TEST_CPU_LOG=str(log), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.cpu_times",
                           "-p", "no:cacheprovider", "-p", "no:xdist", "--rootdir",
                           str(tmp_path), str(tmp_path / "test_sample.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["id"].split("::")[1]: r for r in map(json.loads, log.read_text().splitlines())}
    assert set(rows) == {"test_busy", "test_waits", "test_child"}
    assert rows["test_busy"]["cpu"] >= 0.3 and rows["test_busy"]["children"] < 0.1
    assert rows["test_waits"]["wall"] >= 0.3 and rows["test_waits"]["cpu"] < 0.2
    assert rows["test_child"]["children"] >= 0.3 and rows["test_child"]["cpu"] < 0.2


def test_nothing_written_without_the_variable(tmp_path):
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if k != "BATCHCHAT_TEST_CPU_LOG"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.cpu_times",
                           "-p", "no:cacheprovider", "-p", "no:xdist", "--rootdir",
                           str(tmp_path), str(tmp_path / "test_sample.py"), "-k", "waits"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [p.name for p in tmp_path.iterdir() if p.name != "__pycache__"] == ["test_sample.py"]
