#!/usr/bin/env bash
# The locked dependencies: uv.lock (every version and every file's sha256, for every
# platform) from pyproject.toml, and its exports in requirements/ that pip installs with
# --require-hashes:
#   runtime.txt  restarter's dependencies (the image, the kubectl plugin)
#   build.txt    the build backend (setuptools, wheel) that builds restarter's own wheel
#   dev.txt      runtime, dev extras, build backend and the dev tools' dependencies
#                (hack/setup.sh; the dev tools themselves, dev/, are installed editable)
#   bench.txt    dev.txt plus the bench extras (bench/run)
# The dev tools (dev/pyproject.toml) are a member of the same uv workspace, locked in the
# same uv.lock; no export names restarter or them (--no-emit-workspace): they are built
# from the repository.
#
#   hack/lock.sh            lock again after a change to pyproject.toml's dependencies,
#                           keeping every version that still fits (needs PyPI)
#   hack/lock.sh --upgrade  move every package to its newest version that fits (needs PyPI)
#   hack/lock.sh --check    fail when uv.lock or an export is out of date with
#                           pyproject.toml (offline; hack/test.sh runs it)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
UV="${UV:-$ROOT/.venv/bin/uv}"
[[ -x "$UV" ]] || { echo "lock: $UV is missing; hack/setup.sh installs it (dev extras)" >&2; exit 1; }

# name: uv export's arguments
EXPORTS=(
  "runtime:--no-default-groups"
  "build:--only-group build"
  "dev:--no-default-groups --extra dev --group build --group dev-tools"
  "bench:--no-default-groups --extra dev --extra bench --group build --group dev-tools"
)

export_all() { # directory to write into
  local entry name args
  for entry in "${EXPORTS[@]}"; do
    name="${entry%%:*}" args="${entry#*:}"
    # shellcheck disable=SC2086  # args is a list of words
    "$UV" export --quiet --frozen --no-emit-workspace --format requirements.txt $args \
      --output-file "$1/$name.txt"
    # The header names the command, not the folder it wrote to: the same on every machine.
    sed -i "s|--output-file [^ ]*/$name.txt|--output-file requirements/$name.txt|" "$1/$name.txt"
  done
}

build_backend_matches() { # each [build-system] requires == the build group, or say how they differ
  "$ROOT/.venv/bin/python" - <<'PY'
import sys, tomllib
group = sorted(tomllib.load(open("pyproject.toml", "rb"))["dependency-groups"]["build"])
for path in ("pyproject.toml", "dev/pyproject.toml"):
    backend = sorted(tomllib.load(open(path, "rb"))["build-system"]["requires"])
    if backend != group:
        sys.exit(f"lock: {path}'s [build-system] requires {backend} but the build group locks {group}")
PY
}

case "${1:-}" in
  --check)
    build_backend_matches
    if ! "$UV" lock --check --offline --quiet 2>/dev/null; then
      echo "lock: uv.lock is out of date with pyproject.toml; run hack/lock.sh and commit" \
        "uv.lock and requirements/" >&2
      exit 1
    fi
    fresh="$(mktemp -d)"
    trap 'rm -rf "$fresh"' EXIT
    export_all "$fresh"
    for entry in "${EXPORTS[@]}"; do
      name="${entry%%:*}"
      if ! cmp -s "$fresh/$name.txt" "requirements/$name.txt"; then
        echo "lock: requirements/$name.txt is not uv.lock's export; run hack/lock.sh and" \
          "commit requirements/" >&2
        exit 1
      fi
    done
    echo "lock: uv.lock and requirements/ match pyproject.toml"
    ;;
  --upgrade | "")
    build_backend_matches
    "$UV" lock ${1:+--upgrade}
    mkdir -p requirements
    export_all requirements
    echo "lock: wrote uv.lock and requirements/{runtime,build,dev,bench}.txt"
    ;;
  *)
    echo "usage: hack/lock.sh [--check | --upgrade]" >&2
    exit 2
    ;;
esac
