#!/usr/bin/env bash
# Set up (idempotent) and start BatchChat on the bundled model. Extra arguments go to the app.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m batchchat "$@"
