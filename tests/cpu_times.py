"""Opt-in pytest plugin: each test's wall and CPU seconds, one JSON line a test, appended to
the file $BATCHCHAT_TEST_CPU_LOG (xdist workers append to the same file).

`pytest -p tests.cpu_times ...`. On a shared machine wall time says little about what a test
costs; CPU seconds (every thread of the test's process, plus the child processes it waited
for) do. A module's fixtures count in its first test, as in pytest's --durations."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

LOG_VARIABLE = "BATCHCHAT_TEST_CPU_LOG"


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    path = os.environ.get(LOG_VARIABLE)
    if not path:
        yield
        return
    wall, cpu, children = time.monotonic(), time.process_time(), _children_cpu()
    yield
    record = {"id": item.nodeid, "wall": round(time.monotonic() - wall, 3),
              "cpu": round(time.process_time() - cpu, 3),
              "children": round(_children_cpu() - children, 3),
              "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
    with open(path, "a", encoding="utf-8") as f:  # one short write: workers' lines stay whole
        f.write(json.dumps(record) + "\n")
