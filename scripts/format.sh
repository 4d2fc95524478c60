#!/usr/bin/env bash
# Formats Python files with `ruff format` (settings: pyproject.toml's [tool.ruff]), then runs the
# layering test, since formatting can push a file past 400 lines or a function past 60.
#   scripts/format.sh [PATH...]          format PATHs (default: the whole tree)
#   scripts/format.sh --check [PATH...]  only say which files formatting would change (exit 1 if any)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TEOLA_VENV:-$(pwd)/.venv}
if [ "${1:-}" = "--check" ]; then
  shift
  exec "$VENV/bin/ruff" format --check "${@:-.}"
fi
"$VENV/bin/ruff" format "${@:-.}"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/unit/test_layering.py
