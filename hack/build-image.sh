#!/usr/bin/env bash
# Builds the images the real node runs, without a container engine or a registry:
# - restarter's own, from the repo's one Dockerfile, with buildah (daemonless, Debian's), on a
#   Debian bookworm + python3 base that mmdebstrap makes from Debian's packages;
# - the node's pause image and the test/demo app, from Debian's busybox-static.
# Output: OCI archives in $RESTARTER_CACHE/images (default ~/.cache/restarter/images), tagged
# localhost/<name>:<tag>; restarter's tag is the chart's appVersion. A second run with the same
# sources builds nothing; a change to Dockerfile, pyproject.toml, README.md, src/ or the locked
# requirements/ (hack/lock.sh) rebuilds it. restarter's archive is named by its sources' hash,
# and .image-archive in the checkout names the one built from it: clones and worktrees that
# share the cache never run one another's image.
#
#   hack/build-image.sh            the four images, each a numbered step (hack/lib/steps.sh)
#   hack/build-image.sh --count    how many steps that is
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source "$ROOT/hack/lib/steps.sh"
[[ "${1:-}" == --count ]] && { echo 4; exit 0; }

CACHE="${RESTARTER_CACHE:-$HOME/.cache/restarter}"
OUT="$CACHE/images"
mkdir -p "$OUT"
VERSION="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/restarter/Chart.yaml)"
[[ -n "$VERSION" ]] || { echo "build-image: no appVersion in charts/restarter/Chart.yaml" >&2; exit 1; }
BUILDAH=(buildah --root "$CACHE/buildah/storage" --runroot "$CACHE/buildah/run" --storage-driver overlay)
for tool in buildah mmdebstrap; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool is missing; hack/setup.sh installs it" >&2; exit 1; }
done
steps_begin build-image 4

# -- the base: Debian bookworm with python3 and its venv module, from Debian's packages --
BASE_ARGS="--variant=minbase --include=python3,python3-venv --dpkgopt=path-exclude=/usr/share/doc/* --dpkgopt=path-exclude=/usr/share/man/* --dpkgopt=path-exclude=/usr/share/locale/* bookworm"
BASE="localhost/restarter-base:bookworm-$(printf '%s' "$BASE_ARGS" | sha256sum | cut -c1-12)"
build_base() {
  local rootfs ctr
  rootfs="$(mktemp "${TMPDIR:-/tmp}/restarter-base.XXXXXX.tar")"
  # shellcheck disable=SC2086  # BASE_ARGS is a list of words
  mmdebstrap --quiet $BASE_ARGS "$rootfs"
  ctr="$("${BUILDAH[@]}" from scratch)"
  "${BUILDAH[@]}" add "$ctr" "$rootfs" /
  "${BUILDAH[@]}" config --cmd /bin/bash \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
  "${BUILDAH[@]}" commit --quiet --rm "$ctr" "$BASE"
  rm -f "$rootfs"
}
if "${BUILDAH[@]}" inspect --type image "$BASE" >/dev/null 2>&1; then
  step_cached "the image's base: Debian bookworm with python3 (mmdebstrap)"
else
  step_run "the image's base: Debian bookworm with python3 (mmdebstrap)" "1.5 min" build_base
fi

# -- restarter, from the Dockerfile ------------------------------------------------------
IMAGE="localhost/restarter:$VERSION"
source_hash="$( (echo "$BASE"; tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
  --exclude=__pycache__ --exclude='*.egg-info' -cf - Dockerfile .dockerignore pyproject.toml README.md requirements src) \
  | sha256sum | cut -c1-16)"
ARCHIVE="$OUT/restarter-$VERSION-$source_hash.oci.tar"
build_restarter() {
  local pip_ca=() ca
  # Behind a TLS-inspecting proxy the host's pip trusts a CA that the base does not know.
  ca="${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}"
  if [[ -n "$ca" && -f "$ca" ]]; then
    pip_ca=(--volume "$ca:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
  fi
  "${BUILDAH[@]}" build --pull=never --isolation chroot --network host --layers=false \
    --build-arg "BASE=$BASE" "${pip_ca[@]}" --tag "$IMAGE" --file Dockerfile .
  rm -f "$ARCHIVE.tmp"
  "${BUILDAH[@]}" push --quiet "$IMAGE" "oci-archive:$ARCHIVE.tmp:$IMAGE"
  mv "$ARCHIVE.tmp" "$ARCHIVE"
  "${BUILDAH[@]}" rmi --prune || true
  # The six newest stay (other checkouts may run them); older ones go.
  ls -t "$OUT"/restarter-"$VERSION"-*.oci.tar 2>/dev/null | tail -n +7 | xargs -r rm -f
  echo "built $IMAGE: $(du -m "$ARCHIVE" | cut -f1) MB archive"
}
if [[ -f "$ARCHIVE" ]]; then
  step_cached "$IMAGE (buildah, the Dockerfile)"
else
  step_run "$IMAGE (buildah, the Dockerfile)" "1.5 min" build_restarter
fi
echo "$ARCHIVE" >"$ROOT/.image-archive"

# -- the node's pause image and the app, from busybox-static ------------------------------
BUSYBOX=/bin/busybox
file_hash="$(sha256sum "$BUSYBOX" | cut -c1-12)"
busybox_image() { # name, archive, command as a JSON list
  local name="$1" archive="$2" command="$3"
  if [[ -f "$archive" && "$(cat "$archive.source" 2>/dev/null)" == "$file_hash" ]]; then
    step_cached "$name (busybox-static)"
  else
    step_run "$name (busybox-static)" "10 s" build_busybox_image "$@"
  fi
}
build_busybox_image() {
  local name="$1" archive="$2" command="$3"
  local tree ctr applet
  tree="$(mktemp -d)"
  mkdir -p "$tree/bin" "$tree/tmp"
  cp "$BUSYBOX" "$tree/bin/busybox"
  for applet in sh sleep cat echo date env ls id grep sed wc; do ln -s busybox "$tree/bin/$applet"; done
  ctr="$("${BUILDAH[@]}" from scratch)"
  "${BUILDAH[@]}" copy "$ctr" "$tree" /
  "${BUILDAH[@]}" config --env PATH=/bin --cmd "$command" "$ctr"
  "${BUILDAH[@]}" commit --quiet --rm "$ctr" "$name"
  rm -rf "$tree" "$archive.tmp"
  "${BUILDAH[@]}" push --quiet "$name" "oci-archive:$archive.tmp:$name"
  mv "$archive.tmp" "$archive"
  echo "$file_hash" >"$archive.source"
}
[[ -x "$BUSYBOX" ]] || { echo "build-image: $BUSYBOX is missing; hack/setup.sh installs busybox-static" >&2; exit 1; }
busybox_image localhost/restarter-pause:1 "$OUT/restarter-pause-1.oci.tar" '["/bin/sleep","inf"]'
busybox_image localhost/restarter-app:1 "$OUT/restarter-app-1.oci.tar" '["/bin/sh"]'
steps_nested || echo "$OUT"
