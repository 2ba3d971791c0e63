"""python -m engine.native build | info"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.native")
    parser.add_argument("command", choices=["build", "info"])
    args = parser.parse_args(argv)
    if args.command == "build":
        from .build import build

        try:
            lib = build()
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
        print(f"built {lib}")
    from . import available, info

    print(info())
    return 0 if available() else 1


if __name__ == "__main__":
    sys.exit(main())
