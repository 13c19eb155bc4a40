#!/usr/bin/env bash
# Builds every binary of the local test cluster from official Go modules, once (the real
# node's kubelet too; its containerd and runc are Debian's, installed by hack/setup.sh).
# Output: $RESTARTER_CACHE/k8s-<version>/bin (default ~/.cache/restarter/...), and
# cert-manager's controller in $RESTARTER_CACHE/cert-manager-<version>/bin, Argo Rollouts'
# in $RESTARTER_CACHE/argo-rollouts-<version>/bin, the registry, promtool and Alertmanager
# likewise.
# A second run finds the binaries and builds nothing.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/versions.env"

CACHE="${RESTARTER_CACHE:-$HOME/.cache/restarter}"
BIN="$CACHE/k8s-$KUBERNETES_VERSION/bin"
mkdir -p "$BIN"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
export CGO_ENABLED=0

minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
k8s_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION \
 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"

need() { [[ -x "$BIN/$1" ]] && { echo "cached: $BIN/$1"; return 1; }; echo "building: $1"; return 0; }

for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet; do
  if need "$cmd"; then
    (cd "$HERE/tools/kubernetes" && go build -trimpath -ldflags "$k8s_ldflags" -o "$BIN/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd")
    mv "$BIN/$cmd.tmp" "$BIN/$cmd"
  fi
done

if need etcd; then
  (cd "$HERE/tools/etcd" && go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$BIN/etcd.tmp" "$BIN/etcd"
fi

if need kwok; then
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
fi

if need helm; then
  hminor="${KUBERNETES_VERSION#v1.}"; hminor="${hminor%%.*}"
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$hminor" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi

# krew, as kubectl finds it (kubectl-krew): the kubectl plugin's tests install with it.
if need kubectl-krew; then
  krew_tmp="$(mktemp -d)"
  GOBIN="$krew_tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION"
  mv "$krew_tmp/krew" "$BIN/kubectl-krew"
  rmdir "$krew_tmp"
fi

# A controller from its pinned module (hack/tools/<name>), into $CACHE/<name>-<version>/bin;
# then the module itself is downloaded, since the tests read its CRDs from the module cache.
build_controller() {
  local name=$1 module=$2 version=$3 package=$4 binary=$5
  local tools="$HERE/tools/$name" bin="$CACHE/$name-$version/bin"
  grep -Eq "$module $version( |\$)" "$tools/go.mod" || {
    echo "hack/tools/$name/go.mod does not require $module $version" >&2; exit 1; }
  mkdir -p "$bin"
  if [[ -x "$bin/$binary" ]]; then
    echo "cached: $bin/$binary"
  else
    echo "building: $binary"
    (cd "$tools" && go build -trimpath -ldflags "-s -w" -o "$bin/$binary.tmp" "$package")
    mv "$bin/$binary.tmp" "$bin/$binary"
  fi
  (cd "$tools" && go mod download "$module")
}

# cert-manager's controller: built by hack/tools/cert-manager/main.go (the upstream
# cmd/controller is a module of its own that the proxy does not serve).
build_controller cert-manager github.com/cert-manager/cert-manager "$CERT_MANAGER_VERSION" \
  . cert-manager-controller
# Argo Rollouts' controller: its own cmd, through hack/tools/argo-rollouts, which copies the
# module's replace directives (they apply only in a main module). 4 min 40 s here with -p=1.
build_controller argo-rollouts github.com/argoproj/argo-rollouts "$ARGO_ROLLOUTS_VERSION" \
  github.com/argoproj/argo-rollouts/cmd/rollouts-controller rollouts-controller
# Alertmanager: the alert gate's tests run it on loopback and post alerts to its v2 API.
# Its module lacks the web interface's built assets (its ui package embeds them), so it is
# built from a temporary copy of the module whose ui/web.go is
# hack/tools/alertmanager/no-ui/web.go (Go allows no overlay inside the module cache).
am_tools="$HERE/tools/alertmanager" am_bin="$CACHE/alertmanager-$ALERTMANAGER_VERSION/bin"
grep -Eq "github.com/prometheus/alertmanager $ALERTMANAGER_VERSION( |\$)" "$am_tools/go.mod" || {
  echo "hack/tools/alertmanager/go.mod does not require alertmanager $ALERTMANAGER_VERSION" >&2
  exit 1; }
mkdir -p "$am_bin"
if [[ -x "$am_bin/alertmanager" ]]; then
  echo "cached: $am_bin/alertmanager"
else
  echo "building: alertmanager"
  am_work="$(mktemp -d)"
  (
    cd "$am_tools"
    go mod download github.com/prometheus/alertmanager
    cp -r "$(go list -m -f '{{.Dir}}' github.com/prometheus/alertmanager)" "$am_work/module"
    chmod -R u+w "$am_work/module"
    cp "$am_tools/no-ui/web.go" "$am_work/module/ui/web.go"
    mkdir "$am_work/tools"
    cp go.mod go.sum tools.go "$am_work/tools/"
    cd "$am_work/tools"
    go mod edit -replace "github.com/prometheus/alertmanager=$am_work/module"
    go build -mod=mod -trimpath -ldflags "-s -w \
      -X github.com/prometheus/common/version.Version=${ALERTMANAGER_VERSION#v}" \
      -o "$am_bin/alertmanager.tmp" github.com/prometheus/alertmanager/cmd/alertmanager
  )
  rm -rf "$am_work"
  mv "$am_bin/alertmanager.tmp" "$am_bin/alertmanager"
fi

# The OCI registry that serves the image and the chart to the real node, and promtool, which
# checks and unit-tests the chart's PrometheusRule.
build_controller registry github.com/distribution/distribution/v3 "$DISTRIBUTION_VERSION" \
  github.com/distribution/distribution/v3/cmd/registry registry
# remove_all_sd: without Prometheus's service discoveries and the cloud SDKs they import;
# checking and testing rules uses none of them.
GOFLAGS="$GOFLAGS -tags=remove_all_sd" \
  build_controller promtool github.com/prometheus/prometheus "$PROMETHEUS_VERSION" \
  github.com/prometheus/prometheus/cmd/promtool promtool
# The registry's htpasswd line maker (bcrypt, the one hash its htpasswd file takes).
build_controller registry github.com/distribution/distribution/v3 "$DISTRIBUTION_VERSION" \
  ./htpasswd registry-htpasswd

echo "$BIN"
