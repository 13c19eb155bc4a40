#!/usr/bin/env bash
# Publishes restarter to an OCI registry: the image (built by hack/build-image.sh, copied
# from its OCI archive by skopeo) and the chart (helm package, helm push), the chart's
# values pointing at that image by digest.
#
#   hack/release.sh REGISTRY        e.g. registry.example.com/platform, 127.0.0.1:5000
#
# Refuses to start unless Chart.yaml's version and appVersion and pyproject.toml's version
# are one number with an entry in CHANGELOG.md (hack/changelog.sh). Pushes
# REGISTRY/restarter:<appVersion> and oci://REGISTRY/charts/restarter:<version>, and
# prints what it pushed as image=, digest=, chart= and version= lines. Credentials: a
# Docker-config file in RELEASE_AUTHFILE (else skopeo's and helm's own logins);
# RELEASE_PLAIN_HTTP=1 for a registry without TLS (a local one).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

REGISTRY="${1:?usage: hack/release.sh REGISTRY (host[:port][/path])}"
REGISTRY="${REGISTRY%/}"
CHART_DIR=charts/restarter
chart_field() { sed -n "s/^$1: *\"\{0,1\}\([^\"]*\)\"\{0,1\}\$/\1/p" "$CHART_DIR/Chart.yaml"; }
VERSION="$(chart_field version)"
APP_VERSION="$(chart_field appVersion)"

# -- what is released, checked before anything is built or pushed ------------------------
# One number for the chart, the image and the Python package (docs/releasing.md), and a
# changelog entry saying what it holds: a release nobody wrote notes for is refused.
PACKAGE_VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml)"
if [[ "$APP_VERSION" != "$VERSION" || "$PACKAGE_VERSION" != "$VERSION" ]]; then
  echo "release: versions differ: Chart.yaml version $VERSION, appVersion $APP_VERSION, pyproject.toml $PACKAGE_VERSION" >&2
  exit 1
fi
"$ROOT/hack/changelog.sh" "$VERSION" >/dev/null || {
  echo "release: refusing to release $VERSION without its entry in CHANGELOG.md" >&2
  exit 1
}

for tool in skopeo helm; do
  command -v "$tool" >/dev/null || { echo "release: $tool is missing; hack/setup.sh installs it" >&2; exit 1; }
done

skopeo_opts=() helm_opts=()
if [[ -n "${RELEASE_AUTHFILE:-}" ]]; then
  skopeo_opts+=(--dest-authfile "$RELEASE_AUTHFILE")
  helm_opts+=(--registry-config "$RELEASE_AUTHFILE")
fi
if [[ "${RELEASE_PLAIN_HTTP:-0}" == 1 ]]; then
  skopeo_opts+=(--dest-tls-verify=false)
  helm_opts+=(--plain-http)
fi

# -- the image ----------------------------------------------------------------------------
"$ROOT/hack/build-image.sh" >&2
# The archive hack/build-image.sh built from this checkout's sources.
ARCHIVE="$(cat "$ROOT/.image-archive" 2>/dev/null || true)"
[[ -f "$ARCHIVE" ]] || { echo "release: hack/build-image.sh named no image built from this checkout" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
IMAGE="$REGISTRY/restarter:$APP_VERSION"
echo "release: pushing $IMAGE" >&2
skopeo copy --quiet --preserve-digests "${skopeo_opts[@]}" --digestfile "$work/digest" \
  "oci-archive:$ARCHIVE" "docker://$IMAGE" >&2
DIGEST="$(cat "$work/digest")"

# -- the chart, its image pinned to what was just pushed ----------------------------------
cp -r "$CHART_DIR" "$work/restarter"
values="$work/restarter/values.yaml"
sed -i -e "s|^  repository: restarter\$|  repository: $REGISTRY/restarter|" \
  -e "s|^  digest: \"\"\$|  digest: \"$DIGEST\"|" "$values"
grep -q "^  repository: $REGISTRY/restarter\$" "$values" && grep -q "^  digest: \"$DIGEST\"\$" "$values" || {
  echo "release: $CHART_DIR/values.yaml no longer has image.repository: restarter and image.digest: \"\"" >&2
  exit 1
}
# Artifact Hub lists (and scans) the image the published chart runs.
chart="$work/restarter/Chart.yaml"
sed -i "s|^      image: restarter:$APP_VERSION\$|      image: $REGISTRY/restarter:$APP_VERSION|" "$chart"
grep -q "^      image: $REGISTRY/restarter:$APP_VERSION\$" "$chart" || {
  echo "release: $CHART_DIR/Chart.yaml's artifacthub.io/images no longer lists restarter:$APP_VERSION" >&2
  exit 1
}
helm package "$work/restarter" --destination "$work" >&2
echo "release: pushing oci://$REGISTRY/charts/restarter:$VERSION" >&2
helm push "$work/restarter-$VERSION.tgz" "oci://$REGISTRY/charts" "${helm_opts[@]}" >&2

echo "image=$IMAGE"
echo "digest=$DIGEST"
echo "chart=oci://$REGISTRY/charts/restarter"
echo "version=$VERSION"
