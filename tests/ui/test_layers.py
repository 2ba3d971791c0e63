"""The window never pulls in MLX: `ui` reaches the engine only through `app`, which loads
the MLX parts lazily (when a model is loaded)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_main_window_loads_no_mlx_module():
    probe = ("import sys, ui.main_window; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('mlx', 'mlx_lm')))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert out.strip() == "[]"
