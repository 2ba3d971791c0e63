"""engine.public, the one engine module `app` imports outside app.bridge.local_target, loads
no MLX, and hands out the very objects the engine's own modules define."""

import subprocess
import sys
from pathlib import Path

import engine
import engine.public as public

ROOT = Path(__file__).resolve().parents[2]


def test_importing_engine_public_loads_no_mlx_module():
    probe = ("import sys, engine.public; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('mlx', 'mlx_lm', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert out.strip() == "[]"


def test_public_names_are_the_engine_s_own():
    for name in ("EngineError", "EngineStopped", "QueueFullError", "RequestRejected",
                 "SamplingParams", "TokenEvent", "Priority", "EngineStats", "RequestProgress",
                 "RequestRow", "RequestStats", "TickRecord", "RequestStream"):
        assert getattr(public, name) is getattr(engine, name), name
    assert set(public.__all__) == {n for n in dir(public) if not n.startswith("_")
                                   and n not in ("annotations",)}
