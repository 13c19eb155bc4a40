#!/usr/bin/env bash
# Prepares a fresh machine: Debian's packages for the real node and the image build, a
# virtualenv with restarter and its dev tools, the control-plane binaries and the images
# (built once into ~/.cache/restarter; later runs build nothing).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# The real node's runtime (containerd, runc, CNI plugins, nsenter, ip) and the daemonless
# image build (buildah, mmdebstrap, busybox-static) and its push (skopeo), from Debian's packages.
DEBIAN_PACKAGES=(containerd runc containernetworking-plugins iproute2 util-linux
  buildah mmdebstrap busybox-static uidmap fuse-overlayfs skopeo)
missing=()
for package in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  as_root=(); [[ "$(id -u)" == 0 ]] || as_root=(sudo)
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PYTHON="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  "$PYTHON" -m venv .venv
fi
# The dev environment exactly as locked (requirements/dev.txt, uv.lock's export: every file's
# sha256 checked, nothing the lock does not name), then restarter and its dev tools (dev/),
# editable, built by the locked setuptools.
stamp=".venv/.installed-$(cat pyproject.toml dev/pyproject.toml requirements/dev.txt | sha256sum | cut -c1-16)"
if [[ ! -f "$stamp" ]]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check \
    --require-hashes --no-deps -r requirements/dev.txt
  .venv/bin/python -m pip install --quiet --disable-pip-version-check \
    --no-deps --no-build-isolation --no-index -e . -e dev
  rm -f .venv/.installed-*
  touch "$stamp"
fi
# The locked runtime's wheels that hack/build-plugin.sh bundles into the kubectl plugin.
"$ROOT/hack/build-plugin.sh" --fetch

command -v go >/dev/null || { echo "setup: Go is required to build the control plane" >&2; exit 1; }
"$ROOT/hack/build-cluster-binaries.sh" >/dev/null
"$ROOT/hack/build-image.sh" >/dev/null
