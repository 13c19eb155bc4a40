#!/usr/bin/env bash
# Prepares a fresh machine: Debian's packages for the real node and the image build, a
# virtualenv with restarter and its dev tools, the control-plane binaries and the images
# (built once into ~/.cache/restarter; later runs build nothing).
#
# Each step is numbered and timed as it runs (hack/lib/steps.sh); what the tools print goes
# to a log file named on the first line, of which a failed step shows the last 40 lines.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source "$ROOT/hack/lib/steps.sh"

command -v go >/dev/null || { echo "setup: Go is required to build the control plane" >&2; exit 1; }
steps_begin setup $((3 + $("$ROOT/hack/build-cluster-binaries.sh" --count) + $("$ROOT/hack/build-image.sh" --count)))

# The real node's runtime (containerd, runc, CNI plugins, nsenter, ip) and the daemonless
# image build (buildah, mmdebstrap, busybox-static) and its push (skopeo), from Debian's packages.
DEBIAN_PACKAGES=(containerd runc containernetworking-plugins iproute2 util-linux
  buildah mmdebstrap busybox-static uidmap fuse-overlayfs skopeo)
missing=()
for package in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
install_packages() {
  local as_root=()
  [[ "$(id -u)" == 0 ]] || as_root=(sudo)
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}
if ((${#missing[@]})); then
  step_run "Debian packages: ${missing[*]}" "15 s" install_packages "${missing[@]}"
else
  step_cached "Debian packages"
fi

# The dev environment exactly as locked (requirements/dev.txt, uv.lock's export: every file's
# sha256 checked, nothing the lock does not name), then restarter and its dev tools (dev/),
# editable, built by the locked setuptools.
PYTHON="${PYTHON:-python3}"
stamp=".venv/.installed-$(cat pyproject.toml dev/pyproject.toml requirements/dev.txt | sha256sum | cut -c1-16)"
install_venv() {
  [[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install --disable-pip-version-check \
    --require-hashes --no-deps -r requirements/dev.txt
  .venv/bin/python -m pip install --disable-pip-version-check \
    --no-deps --no-build-isolation --no-index -e . -e dev
  rm -f .venv/.installed-*
  touch "$stamp"
}
if [[ -x .venv/bin/python && -f "$stamp" ]]; then
  step_cached "Python environment .venv (requirements/dev.txt)"
else
  step_run "Python environment .venv (requirements/dev.txt)" "1 min" install_venv
fi

# The locked runtime's wheels that hack/build-plugin.sh bundles into the kubectl plugin.
if "$ROOT/hack/build-plugin.sh" --fetched; then
  step_cached "the kubectl plugin's wheels (requirements/runtime.txt)"
else
  step_run "the kubectl plugin's wheels (requirements/runtime.txt)" "20 s" "$ROOT/hack/build-plugin.sh" --fetch
fi

"$ROOT/hack/build-cluster-binaries.sh"
"$ROOT/hack/build-image.sh"
