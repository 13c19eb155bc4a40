#!/usr/bin/env bash
# The whole test suite: lint, types, unit tier and integration tier (real control plane).
# Extra arguments go to pytest, e.g. ./hack/test.sh -m "not cluster".
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
"$ROOT/hack/setup.sh"

echo "== lock"
"$ROOT/hack/lock.sh" --check
echo "== ruff"
.venv/bin/ruff check src dev tests bench hack
.venv/bin/ruff format --check src dev tests bench hack
echo "== mypy"
.venv/bin/mypy
echo "== import-linter (the layers in docs/design.md)"
.venv/bin/lint-imports
echo "== unit sizes (functions at most 60 lines, modules at most 400, in src/)"
.venv/bin/python hack/unit_sizes.py
echo "== pytest"
# Each worker runs whole files against a control plane (and a real node) of its own: most of
# the suite's time is waiting on wall-clock windows and probes, not CPU.
# Files go to workers longest first (tests/durations.py), not by their number of tests.
.venv/bin/pytest -n "${RESTARTER_TEST_WORKERS:-5}" --dist loadfile --no-loadscope-reorder "$@"
