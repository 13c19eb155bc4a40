#!/usr/bin/env bash
# Prepares a fresh machine: a virtualenv with restarter and its dev tools, and the
# control-plane binaries (built once into ~/.cache/restarter; later runs build nothing).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PYTHON="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  "$PYTHON" -m venv .venv
fi
stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [[ ! -f "$stamp" ]]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[dev]'
  touch "$stamp"
fi

command -v go >/dev/null || { echo "setup: Go is required to build the control plane" >&2; exit 1; }
"$ROOT/hack/build-cluster-binaries.sh" >/dev/null
