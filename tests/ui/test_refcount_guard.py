"""PySide6 6.12 loses a reference to True per Python-side signal emit and one to None per
C++ call of a Python void override (ui/refcount_guard.py). A child process does each more
often than the object has references: it survives only with the workaround in place."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHURN = r"""
import asyncio, sys, threading
import ui  # applies the workaround, as every ui import does
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget
from ui.event_loop import make_app, make_loop

app = make_app([])

class Pinger(QObject):
    ping = Signal(int)

# Twice the references each has now (less the 2**56 the workaround adds): each part below
# alone would run its count down to zero.
TRUE_CALLS, NONE_CALLS = (2 * (sys.getrefcount(obj) % (1 << 56)) + 1000 for obj in (True, None))

# 1. The app's own signals, emitted from Python.
pinger = Pinger()
for i in range(TRUE_CALLS):
    pinger.ping.emit(i)

# 2. qasync's call_soon_threadsafe from another thread (the engine's deliveries).
loop = make_loop(app)
n, done = TRUE_CALLS, []

async def wait_for_all():
    thread = threading.Thread(target=lambda: [loop.call_soon_threadsafe(done.append, i)
                                              for i in range(n)])
    thread.start()
    while len(done) < n:
        await asyncio.sleep(0.01)
    thread.join()

loop.run_until_complete(wait_for_all())

# 3. A Python paintEvent called from C++.
class Canvas(QWidget):
    painted = 0

    def paintEvent(self, event):
        Canvas.painted += 1

canvas = Canvas()
canvas.resize(20, 20)
canvas.show()
loop.run_until_complete(asyncio.sleep(0.2))  # shown and exposed: repaint() paints now
Canvas.painted = 0
for _ in range(NONE_CALLS):
    canvas.repaint()
assert Canvas.painted == NONE_CALLS, Canvas.painted
loop.close()
print("survived", flush=True)
"""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="None and True are immortal there")
def test_leaked_references_to_none_and_true_never_abort() -> None:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, "-c", CHURN], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "survived" in proc.stdout, proc.stdout + proc.stderr
