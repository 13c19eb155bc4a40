#!/usr/bin/env bash
# Builds `kubectl restarter`, the kubectl plugin, as one file that needs no virtualenv:
#   dist/plugin/kubectl-restarter             a zipapp (shiv) holding restarter and its
#                                             locked dependencies, run by python3.X
#   dist/plugin/kubectl-restarter-vV-OS-ARCH.tar.gz   that file, archived for krew
#   dist/plugin/restarter.yaml                krew's manifest for the archive (its sha256,
#                                             and its URI: $PLUGIN_BASE_URL/vV/ARCHIVE)
#   dist/plugin/restarter-V-py3-none-any.whl  restarter's wheel, for pip install or pipx
# The dependencies are requirements/runtime.txt's wheels for this machine's Python and
# platform, hash-checked; the zipapp runs with that Python version only (its compiled
# dependencies are for it). Same sources and lock, same bytes: the build is reproducible.
# Those wheels are downloaded once (with their hashes checked) into
# $RESTARTER_CACHE/wheels/; the build itself reaches no network.
#   hack/build-plugin.sh [OUT]    (OUT: default dist/plugin)
#   hack/build-plugin.sh --fetch  only download the wheels (hack/setup.sh does)
#   hack/build-plugin.sh --fetched  exit 0 when they are downloaded already, else 1
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
FETCH_ONLY=false
FETCHED_ONLY=false
[[ "${1:-}" == --fetch ]] && { FETCH_ONLY=true; shift; }
[[ "${1:-}" == --fetched ]] && { FETCHED_ONLY=true; shift; }
PYTHON="$ROOT/.venv/bin/python"
[[ -x "$PYTHON" && -x "$ROOT/.venv/bin/shiv" ]] || {
  echo "build-plugin: .venv with shiv is missing; hack/setup.sh installs it" >&2
  exit 1
}
# Where the release's files are served from; the manifest's URI points there.
PLUGIN_BASE_URL="${PLUGIN_BASE_URL:-https://downloads.example.com/restarter}"
PLUGIN_HOMEPAGE="${PLUGIN_HOMEPAGE:-https://downloads.example.com/restarter}"

read -r VERSION PY_VERSION < <("$PYTHON" -c '
import sys, tomllib
print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"], "%d.%d" % sys.version_info[:2])')
OS="$(uname -s | tr '[:upper:]' '[:lower:]')"
case "$(uname -m)" in
  x86_64) ARCH=amd64 ;;
  aarch64 | arm64) ARCH=arm64 ;;
  *) ARCH="$(uname -m)" ;;
esac
ARCHIVE="kubectl-restarter-v$VERSION-$OS-$ARCH.tar.gz"
pip=("$PYTHON" -m pip --disable-pip-version-check --quiet)

# The locked runtime's wheels for this Python and platform, each checked against its hash.
WHEELS="${RESTARTER_CACHE:-$HOME/.cache/restarter}/wheels/py$PY_VERSION-$OS-$(uname -m)"
fetched="$WHEELS/.fetched-$(sha256sum requirements/runtime.txt | cut -c1-16)"
if $FETCHED_ONLY; then [[ -f "$fetched" ]]; exit; fi
if [[ ! -f "$fetched" ]]; then
  echo "build-plugin: downloading the locked runtime's wheels into $WHEELS"
  mkdir -p "$WHEELS"
  "${pip[@]}" download --require-hashes --no-deps --only-binary :all: --dest "$WHEELS" \
    -r requirements/runtime.txt
  rm -f "$WHEELS"/.fetched-*
  touch "$fetched"
fi
$FETCH_ONLY && exit 0
OUT="$(mkdir -p "${1:-dist/plugin}" && cd "${1:-dist/plugin}" && pwd)"

# A fixed work folder (not mktemp): the paths pip records stay the same from build to build.
WORK="$ROOT/build/plugin"
rm -rf "$WORK"
mkdir -p "$WORK/wheel" "$WORK/site" "$WORK/archive"

# Every timestamp in the wheel and the zipapp (1980-01-01, zip's first day).
export SOURCE_DATE_EPOCH=315532800
# restarter's own wheel, built by the locked setuptools of the dev environment from a copy of
# what the Dockerfile copies (setuptools' build/ folder in the tree may hold removed modules).
mkdir "$WORK/tree"
tar --exclude=__pycache__ --exclude='*.egg-info' -cf - pyproject.toml README.md src \
  | tar -C "$WORK/tree" -xf -
"${pip[@]}" wheel --no-deps --no-build-isolation --no-index --wheel-dir "$WORK/wheel" "$WORK/tree"
wheel="$(ls "$WORK"/wheel/restarter-*.whl)"
# The locked dependencies, hash-checked, binary wheels only (shiv adds restarter's wheel).
# No .pyc: the zipapp compiles nothing ahead, so its bytes do not depend on when it was built.
env -u PIP_FIND_LINKS "${pip[@]}" install --require-hashes --no-deps --only-binary :all: \
  --no-compile --no-index --find-links "$WHEELS" --target "$WORK/site" -r requirements/runtime.txt
# As in the image: the Kubernetes client's asyncio copy never runs (68 MB); scripts neither
# (their records go too: they name the interpreter that installed them, a path of this machine).
rm -rf "$WORK/site/kubernetes/aio" "$WORK/site/bin"
sed -i '/^\.\.\/\.\.\/bin\//d' "$WORK"/site/*.dist-info/RECORD

# Run by another Python, the compiled dependencies would fail to import: say so first.
cat >"$WORK/preamble.py" <<PY
import sys

if sys.version_info[:2] != (${PY_VERSION/./, }):
    sys.exit(
        "kubectl-restarter: built for Python $PY_VERSION, run by Python %d.%d: install"
        " python$PY_VERSION, or restarter's wheel with pip or pipx" % sys.version_info[:2]
    )
PY
# restarter by name from the wheel's folder, not by its path: pip then records no path of
# this machine (direct_url.json) in the zipapp.
env -u PIP_FIND_LINKS "$ROOT/.venv/bin/shiv" --quiet \
  --site-packages "$WORK/site" --entry-point restarter.kubectl_plugin:main \
  --python "/usr/bin/env python$PY_VERSION" --preamble "$WORK/preamble.py" \
  --reproducible --compressed --output-file "$WORK/archive/kubectl-restarter" \
  --no-deps --no-index --no-compile --find-links "$WORK/wheel" "restarter==$VERSION"
chmod 0755 "$WORK/archive/kubectl-restarter"
tar --sort=name --mtime=@"$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
  -C "$WORK/archive" -cf - kubectl-restarter | gzip -9 -n >"$OUT/$ARCHIVE"
SHA256="$(sha256sum "$OUT/$ARCHIVE" | cut -d' ' -f1)"

sed -e "/^# /d" \
  -e "s|@VERSION@|$VERSION|g" -e "s|@HOMEPAGE@|$PLUGIN_HOMEPAGE|g" \
  -e "s|@PLATFORM_OS@|$OS|g" -e "s|@PLATFORM_ARCH@|$ARCH|g" -e "s|@PYTHON@|python$PY_VERSION|g" \
  -e "s|@URI@|$PLUGIN_BASE_URL/v$VERSION/$ARCHIVE|g" -e "s|@SHA256@|$SHA256|g" \
  plugins/krew/restarter.yaml >"$OUT/restarter.yaml"
cp "$WORK/archive/kubectl-restarter" "$OUT/kubectl-restarter"
rm -f "$OUT"/restarter-*.whl
cp "$wheel" "$OUT/"
echo "build-plugin: $OUT/kubectl-restarter ($(du -m "$OUT/kubectl-restarter" | cut -f1) MB," \
  "Python $PY_VERSION, $OS/$ARCH)"
echo "build-plugin: $OUT/$ARCHIVE sha256 $SHA256"
