"""The gaps between tokens in `bench.serving --out` files: per target and scenario,
the throughput, TTFT median, ITL p99, the longest gap and how many gaps pass 50 / 80 /
120 / 200 ms (the long ones are what a reader of a stream sees as a stall; a p99 hides how
many there are and how long).

    python -m bench.gaps bench-serving/serving.json [more.json ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

LIMITS_MS = (50, 80, 120, 200)


def summary(name: str, scenario: str, m: dict[str, Any]) -> str | None:
    """One line for one target's scenario; None when it has no per-request gaps."""
    gaps = sorted(x for r in m.get("per_request", []) for x in (r.get("itl_s") or []))
    if not gaps:
        return None
    over = ", ".join(f">{ms} {sum(g * 1e3 > ms for g in gaps)}" for ms in LIMITS_MS)
    return (f"{name:10s} {scenario}: tok/s {m['output_throughput']:.1f} TTFT med "
            f"{m['ttft_s']['median'] * 1e3:.0f} ITL p99 {m['itl_s']['p99'] * 1e3:.0f} max "
            f"{gaps[-1] * 1e3:.0f}; gaps {over} (n {len(gaps)})")


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print(__doc__)
        return 2
    for path in paths:
        data = json.loads(Path(path).read_text())
        for name, target in data["targets"].items():
            for scenario, m in target.items():
                line = summary(name, scenario, m) if isinstance(m, dict) else None
                if line:
                    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
