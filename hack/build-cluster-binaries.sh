#!/usr/bin/env bash
# Builds every binary of the local test cluster from official Go modules, once (the real
# node's kubelet too; its containerd and runc are Debian's, installed by hack/setup.sh).
# Output: $RESTARTER_CACHE/k8s-<version>/bin (default ~/.cache/restarter/...), and
# cert-manager's controller in $RESTARTER_CACHE/cert-manager-<version>/bin, Argo Rollouts'
# in $RESTARTER_CACHE/argo-rollouts-<version>/bin, the registry, promtool, Alertmanager and
# the Secrets Store CSI Driver (its node plugin and its fake provider) likewise.
# A second run finds the binaries and builds nothing.
#
#   hack/build-cluster-binaries.sh [COMPONENT...]   every component, or only those named
#   hack/build-cluster-binaries.sh --count [...]    how many steps that would be
#
# Each component is a numbered step (hack/lib/steps.sh): Go's output goes to the steps' log,
# with `-v` so that the heartbeat names the package being built.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/versions.env"
source "$HERE/lib/steps.sh"

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

k8s_cmd() { # command
  cd "$HERE/tools/kubernetes"
  go build -v -trimpath -ldflags "$k8s_ldflags" -o "$BIN/$1.tmp" "k8s.io/kubernetes/cmd/$1"
  mv "$BIN/$1.tmp" "$BIN/$1"
}

build_etcd() {
  cd "$HERE/tools/etcd"
  go build -v -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$BIN/etcd.tmp" "$BIN/etcd"
}

build_kwok() {
  GOBIN="$BIN" go install -v -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
}

build_helm() {
  local hminor="${KUBERNETES_VERSION#v1.}"; hminor="${hminor%%.*}"
  GOBIN="$BIN" go install -v -trimpath -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$hminor" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

# krew, as kubectl finds it (kubectl-krew): the kubectl plugin's tests install with it.
build_krew() {
  local krew_tmp
  krew_tmp="$(mktemp -d)"
  GOBIN="$krew_tmp" go install -v -trimpath -ldflags "-s -w" "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION"
  mv "$krew_tmp/krew" "$BIN/kubectl-krew"
  rmdir "$krew_tmp"
}

# A controller from its pinned module (hack/tools/<name>), into $CACHE/<name>-<version>/bin.
controller_bin() { echo "$CACHE/$1-$2/bin"; } # name version
build_controller() { # name package binary
  local name=$1 package=$2 binary=$3 bin
  bin="$(controller_bin "$name" "$(controller_version "$name")")"
  mkdir -p "$bin"
  cd "$HERE/tools/$name"
  go build -v -trimpath -ldflags "-s -w" -o "$bin/$binary.tmp" "$package"
  mv "$bin/$binary.tmp" "$bin/$binary"
}
controller_version() {
  case "$1" in
    cert-manager) echo "$CERT_MANAGER_VERSION" ;;
    argo-rollouts) echo "$ARGO_ROLLOUTS_VERSION" ;;
    registry) echo "$DISTRIBUTION_VERSION" ;;
    promtool) echo "$PROMETHEUS_VERSION" ;;
    alertmanager) echo "$ALERTMANAGER_VERSION" ;;
    secrets-store-csi-driver) echo "$SECRETS_STORE_CSI_DRIVER_VERSION" ;;
  esac
}
controller_module() {
  case "$1" in
    cert-manager) echo github.com/cert-manager/cert-manager ;;
    argo-rollouts) echo github.com/argoproj/argo-rollouts ;;
    registry) echo github.com/distribution/distribution/v3 ;;
    promtool) echo github.com/prometheus/prometheus ;;
    alertmanager) echo github.com/prometheus/alertmanager ;;
    secrets-store-csi-driver) echo sigs.k8s.io/secrets-store-csi-driver ;;
  esac
}

# Alertmanager: the alert gate's tests run it on loopback and post alerts to its v2 API.
# Its module lacks the web interface's built assets (its ui package embeds them), so it is
# built from a temporary copy of the module whose ui/web.go is
# hack/tools/alertmanager/no-ui/web.go (Go allows no overlay inside the module cache).
build_alertmanager() {
  local am_tools="$HERE/tools/alertmanager" am_bin am_work
  am_bin="$(controller_bin alertmanager "$ALERTMANAGER_VERSION")"
  am_work="$(mktemp -d)"
  mkdir -p "$am_bin"
  cd "$am_tools"
  go mod download github.com/prometheus/alertmanager
  cp -r "$(go list -m -f '{{.Dir}}' github.com/prometheus/alertmanager)" "$am_work/module"
  chmod -R u+w "$am_work/module"
  cp "$am_tools/no-ui/web.go" "$am_work/module/ui/web.go"
  mkdir "$am_work/tools"
  cp go.mod go.sum tools.go "$am_work/tools/"
  cd "$am_work/tools"
  go mod edit -replace "github.com/prometheus/alertmanager=$am_work/module"
  go build -v -mod=mod -trimpath -ldflags "-s -w \
    -X github.com/prometheus/common/version.Version=${ALERTMANAGER_VERSION#v}" \
    -o "$am_bin/alertmanager.tmp" github.com/prometheus/alertmanager/cmd/alertmanager
  rm -rf "$am_work"
  mv "$am_bin/alertmanager.tmp" "$am_bin/alertmanager"
}

# Where each component's binary lives, and the step that builds it.
target() {
  case "$1" in
    cert-manager-controller) echo "$(controller_bin cert-manager "$CERT_MANAGER_VERSION")/$1" ;;
    rollouts-controller) echo "$(controller_bin argo-rollouts "$ARGO_ROLLOUTS_VERSION")/$1" ;;
    alertmanager) echo "$(controller_bin alertmanager "$ALERTMANAGER_VERSION")/$1" ;;
    registry | registry-htpasswd) echo "$(controller_bin registry "$DISTRIBUTION_VERSION")/$1" ;;
    promtool) echo "$(controller_bin promtool "$PROMETHEUS_VERSION")/$1" ;;
    secrets-store-csi-driver | secrets-store-fake-provider | secrets-store-registrar)
      echo "$(controller_bin secrets-store-csi-driver "$SECRETS_STORE_CSI_DRIVER_VERSION")/$1" ;;
    *) echo "$BIN/$1" ;;
  esac
}
build() {
  case "$1" in
    kube-* | kubectl | kubelet) k8s_cmd "$1" ;;
    etcd) build_etcd ;;
    kwok) build_kwok ;;
    helm) build_helm ;;
    kubectl-krew) build_krew ;;
    # cert-manager's controller: built by hack/tools/cert-manager/main.go (the upstream
    # cmd/controller is a module of its own that the proxy does not serve).
    cert-manager-controller) build_controller cert-manager . "$1" ;;
    # Argo Rollouts' controller: its own cmd, through hack/tools/argo-rollouts, which copies
    # the module's replace directives (they apply only in a main module).
    rollouts-controller)
      build_controller argo-rollouts github.com/argoproj/argo-rollouts/cmd/rollouts-controller "$1" ;;
    alertmanager) build_alertmanager ;;
    # The OCI registry that serves the image and the chart to the real node, and its
    # htpasswd line maker (bcrypt, the one hash its htpasswd file takes).
    registry) build_controller registry github.com/distribution/distribution/v3/cmd/registry "$1" ;;
    registry-htpasswd) build_controller registry ./htpasswd "$1" ;;
    # promtool checks and unit-tests the chart's PrometheusRule. remove_all_sd: without
    # Prometheus's service discoveries and the cloud SDKs they import; rules use none.
    promtool)
      GOFLAGS="$GOFLAGS -tags=remove_all_sd" \
        build_controller promtool github.com/prometheus/prometheus/cmd/promtool "$1" ;;
    # The Secrets Store CSI Driver's node plugin, through hack/tools/secrets-store-csi-driver
    # (whose go.mod stands in for monis.app/mlog, which the proxy does not serve), and the
    # driver's own fake provider (provider/fake) served by a small entry point there.
    secrets-store-csi-driver)
      build_controller secrets-store-csi-driver \
        sigs.k8s.io/secrets-store-csi-driver/cmd/secrets-store-csi-driver "$1" ;;
    secrets-store-fake-provider) build_controller secrets-store-csi-driver ./fake-provider "$1" ;;
    # Registers the driver with the kubelet (plugins_registry), as node-driver-registrar
    # does; node-driver-registrar is not served by the module proxy.
    secrets-store-registrar) build_controller secrets-store-csi-driver ./registrar "$1" ;;
  esac
}

# A controller is built from the module version pinned in versions.env, or not at all.
check_pin() { # tools name
  local module version
  module="$(controller_module "$1")" version="$(controller_version "$1")"
  grep -Eq "$module $version( |\$)" "$HERE/tools/$1/go.mod" || {
    echo "hack/tools/$1/go.mod does not require $module $version" >&2; exit 1; }
}
# The tests read cert-manager's, Argo Rollouts' and the CSI driver's CRDs from their module in Go's module
# cache, so the module is downloaded also when the binary is cached (quick when it is there).
fetch_crds() { # tools name
  [[ "$1" == cert-manager || "$1" == argo-rollouts || "$1" == secrets-store-csi-driver ]] || return 0
  (cd "$HERE/tools/$1" && go mod download "$(controller_module "$1")" >>"$RESTARTER_STEPS_LOG" 2>&1)
}
tools_of() {
  case "$1" in
    cert-manager-controller) echo cert-manager ;;
    rollouts-controller) echo argo-rollouts ;;
    alertmanager) echo alertmanager ;;
    registry | registry-htpasswd) echo registry ;;
    promtool) echo promtool ;;
    secrets-store-csi-driver | secrets-store-fake-provider | secrets-store-registrar)
      echo secrets-store-csi-driver ;;
  esac
}

# name  version  rough time on 2 cores with empty caches (the first pays for most downloads)
COMPONENTS=(
  "kube-apiserver $KUBERNETES_VERSION 5-min"
  "kube-controller-manager $KUBERNETES_VERSION 2-min"
  "kube-scheduler $KUBERNETES_VERSION 1-min"
  "kubectl $KUBERNETES_VERSION 1-min"
  "kubelet $KUBERNETES_VERSION 1-min"
  "etcd $ETCD_VERSION 1-min"
  "kwok $KWOK_VERSION 1-min"
  "helm $HELM_VERSION 1-min"
  "kubectl-krew $KREW_VERSION 1-min"
  "cert-manager-controller $CERT_MANAGER_VERSION 3-min"
  "rollouts-controller $ARGO_ROLLOUTS_VERSION 5-min"
  "alertmanager $ALERTMANAGER_VERSION 2-min"
  "registry $DISTRIBUTION_VERSION 1-min"
  "promtool $PROMETHEUS_VERSION 2-min"
  "registry-htpasswd $DISTRIBUTION_VERSION 30-s"
  "secrets-store-csi-driver $SECRETS_STORE_CSI_DRIVER_VERSION 3-min"
  "secrets-store-fake-provider $SECRETS_STORE_CSI_DRIVER_VERSION 30-s"
  "secrets-store-registrar $SECRETS_STORE_CSI_DRIVER_VERSION 30-s"
)
COUNT_ONLY=false
[[ "${1:-}" == --count ]] && { COUNT_ONLY=true; shift; }
selected=()
for entry in "${COMPONENTS[@]}"; do
  name="${entry%% *}"
  if (($# == 0)) || [[ " $* " == *" $name "* ]]; then selected+=("$entry"); fi
done
for wanted in "$@"; do
  [[ " ${selected[*]} " == *" $wanted "* ]] || { echo "build-cluster-binaries: no component $wanted" >&2; exit 2; }
done
$COUNT_ONLY && { echo "${#selected[@]}"; exit 0; }
steps_begin build-cluster-binaries "${#selected[@]}"

for entry in "${selected[@]}"; do
  read -r name version estimate <<<"$entry"
  tools="$(tools_of "$name")"
  [[ -z "$tools" ]] || check_pin "$tools"
  if [[ -x "$(target "$name")" ]]; then
    step_cached "$name ($version)"
  else
    step_run "$name ($version)" "${estimate/-/ }" build "$name"
  fi
  [[ -z "$tools" ]] || fetch_crds "$tools"
done

steps_nested || echo "$BIN"
