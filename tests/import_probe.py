"""What importing a module pulls in, asked of a fresh interpreter (this one has it all)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def modules_loaded_by(module: str, packages: tuple[str, ...]) -> list[str]:
    """The modules of `packages` loaded by `import module`, sorted."""
    probe = (f"import sys, {module}; "
             f"print(sorted(m for m in sys.modules if m.split('.')[0] in {packages!r}))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return eval(out)  # noqa: S307 - a list literal printed by the probe above
