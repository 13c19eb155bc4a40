#!/usr/bin/env bash
# The main job, end to end: a local control plane with a real node, the chart installed
# from a local OCI registry (hack/release.sh pushed it and the image built here), an app on
# the real node printing a Secret labelled restart-at=<a minute or two ahead>, a data change
# that waits for that window, the scheduled restart and the new pod printing the new value;
# then a cron window that keeps a change waiting, and cert-manager renewing a certificate
# that a Deployment mounts.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
"$ROOT/hack/setup.sh"

DIR="$(mktemp -d "${TMPDIR:-/tmp}/restarter-demo.XXXXXX")"
export RESTARTER_CLUSTER_DIR="$DIR/cluster"
BIN="$(.venv/bin/python -c 'from restarter_cluster.binaries import cache_dir; print(cache_dir())')"
kubectl() { "$BIN/kubectl" --kubeconfig "$RESTARTER_CLUSTER_DIR/kubeconfig" "$@"; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# Every claim the demo prints is checked: a claim the cluster does not bear out stops the demo
# with what it found, instead of printing the claim beside evidence of the opposite.
fail() { printf '\ndemo: FAILED: %s\n' "$*" >&2; exit 1; }
# wait_until SECONDS WHAT COMMAND...: run COMMAND every half second until it succeeds.
wait_until() {
  local seconds="$1" what="$2"; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "after ${seconds} s, still not: $what"
    sleep 0.5
  done
}
has_checksum() { kubectl -n demo get "$1" -o jsonpath='{.metadata.annotations.restarter\.io/checksum}' | grep -q sha256; }
replica_sets() { kubectl -n demo get replicasets -l "app=$1" -o name | wc -l; }
at_least_replica_sets() { [[ "$(replica_sets "$1")" -ge "$2" ]]; }
plan_lists() { KUBECONFIG="$RESTARTER_CLUSTER_DIR/kubeconfig" .venv/bin/restarter plan -n demo | grep -q "$1"; }
proof() { .venv/bin/python hack/demo_proof.py "$@"; }
cleanup() {
  .venv/bin/restarter-cluster down >/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

say "local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok) and a real node"
.venv/bin/restarter-cluster up --real-node
kubectl get nodes -o wide

# The next whole minute at least 45 s away, in UTC: the change below waits for it.
WINDOW="$(date -u -d '+105 seconds' +%H.%M)"
say "a Secret labelled restart-at=$WINDOW (UTC) and a Deployment on the real node printing it"
kubectl create namespace demo
kubectl -n demo create secret generic db-credentials --from-literal=password=first
kubectl -n demo label secret db-credentials "restart-at=$WINDOW"
kubectl -n demo apply -f - <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      nodeSelector: {restarter.io/real-node: "true"}
      tolerations: [{key: restarter.io/real-node, operator: Equal, value: "true", effect: NoSchedule}]
      terminationGracePeriodSeconds: 5
      securityContext: {runAsUser: 10001, runAsNonRoot: true}
      containers:
      - name: shop
        image: localhost/restarter-app:1
        imagePullPolicy: Never
        command: [/bin/sh, -c, 'echo "\$(date -u +%T) DB_PASSWORD=\$DB_PASSWORD, /secrets/password=\$(cat /secrets/password)"; trap "exit 0" TERM; while :; do sleep 1; done']
        env:
        - name: DB_PASSWORD
          valueFrom: {secretKeyRef: {name: db-credentials, key: password}}
        volumeMounts: [{name: secrets, mountPath: /secrets, readOnly: true}]
      volumes: [{name: secrets, secret: {secretName: db-credentials}}]
YAML
kubectl -n demo rollout status deployment/shop --timeout=120s
# The pod of the Deployment's current ReplicaSet (its pod-template-hash), and its output
# read from the node's pod log directory.
BEFORE_HASH="$(proof template-hash demo shop)"
echo "what the pod of ReplicaSet $BEFORE_HASH printed:"
proof new-pod demo shop shop --prints "DB_PASSWORD=first, /secrets/password=first" \
  || fail "the app's first pod does not print the Secret's first value"

say "a private OCI registry on loopback (htpasswd); hack/release.sh pushes the image and the chart to it"
eval "$(.venv/bin/restarter-cluster registry --publish)"
echo "image $IMAGE@$IMAGE_DIGEST, chart $CHART $CHART_VERSION"

say "restarter installed with Helm from $CHART, its image pulled by the real node's kubelet (timer every 5s)"
kubectl create namespace restarter
kubectl -n restarter create secret generic regcred --type=kubernetes.io/dockerconfigjson \
  --from-file=.dockerconfigjson="$REGISTRY_AUTH"
"$BIN/helm" --kubeconfig "$RESTARTER_CLUSTER_DIR/kubeconfig" install restarter "$CHART" \
  --version "$CHART_VERSION" --plain-http --registry-config "$REGISTRY_AUTH" \
  -n restarter --set 'imagePullSecrets[0].name=regcred' \
  --set timerInterval=5 --set logFormat=plain \
  --set-json 'nodeSelector={"restarter.io/real-node":"true"}' \
  --set-json 'tolerations=[{"key":"restarter.io/real-node","operator":"Equal","value":"true","effect":"NoSchedule"}]' \
  >/dev/null
kubectl -n restarter rollout status deployment/restarter --timeout=120s
kubectl -n restarter get pods -o wide
pulled="$(kubectl -n restarter get events --field-selector reason=Pulled -o custom-columns=REASON:.reason,MESSAGE:.message)"
echo "$pulled"
grep -qF "$IMAGE" <<<"$pulled" || fail "no Pulled Event names $IMAGE: the kubelet did not pull the image from the registry"
wait_until 30 "restarter recorded a checksum on Secret db-credentials" has_checksum secret/db-credentials
echo "baseline checksum recorded on the Secret; nothing restarted:"
kubectl -n demo get replicasets
[[ "$(replica_sets shop)" -eq 1 ]] || fail "first sight of the Secret restarted the app"

say "the Secret's data changes at $(date -u +%T) (as a certificate rotation would): the restart waits for $WINDOW"
kubectl -n demo patch secret db-credentials -p '{"stringData":{"password":"second"}}'
wait_until 30 "restarter plan lists Deployment/shop as pending" plan_lists Deployment/shop
KUBECONFIG="$RESTARTER_CLUSTER_DIR/kubeconfig" .venv/bin/restarter plan -n demo
[[ "$(replica_sets shop)" -eq 1 ]] || fail "the app restarted before its window $WINDOW"
wait_until 240 "a second ReplicaSet of the app (the restart in the window $WINDOW)" at_least_replica_sets shop 2
echo "restarted at $(date -u +%T)"
kubectl -n demo rollout status deployment/shop --timeout=120s

say "result: a new ReplicaSet from the scheduled restart, and the new pod reads the new value"
kubectl -n demo get replicasets
kubectl -n demo get deployment shop -o jsonpath='restartedAt: {.spec.template.metadata.annotations.kubectl\.kubernetes\.io/restartedAt}{"\n"}restart-ts:  {.metadata.annotations.restarter\.io/restart-ts}{"\n"}'
# The old pod may still be running (terminating) beside the new one: the proof reads the pod
# of the new ReplicaSet, and fails if it printed the old value.
echo "what the pod of the new ReplicaSet printed:"
proof new-pod demo shop shop --before "$BEFORE_HASH" \
  --prints "DB_PASSWORD=second, /secrets/password=second" --not-prints first \
  || fail "the restarted app does not read the Secret's new value"
say "a ConfigMap whose window is a weekday cron six hours from now: the change waits"
LATER="$(date -u -d '+6 hours' '+%-M %-H')"
kubectl -n demo create configmap shop-flags --from-literal=checkout=v1
kubectl -n demo annotate configmap shop-flags "restarter.io/cron=$LATER * * 1-5" restarter.io/timezone=UTC
kubectl -n demo label configmap shop-flags restart-at=cron
kubectl -n demo annotate deployment shop restarter.io/configmaps=shop-flags
wait_until 30 "restarter recorded a checksum on ConfigMap shop-flags" has_checksum configmap/shop-flags
SHOP_SETS="$(replica_sets shop)"
kubectl -n demo patch configmap shop-flags -p '{"data":{"checkout":"v2"}}'
wait_until 30 "restarter plan lists ConfigMap/shop-flags as pending" plan_lists ConfigMap/shop-flags
KUBECONFIG="$RESTARTER_CLUSTER_DIR/kubeconfig" .venv/bin/restarter plan -n demo
[[ "$(replica_sets shop)" -eq "$SHOP_SETS" ]] || fail "the cron window's change restarted the app at once"

say "cert-manager: a CA-issued certificate, renewed as cmctl renew does, restarts what mounts it"
.venv/bin/restarter-cluster cert-manager
kubectl -n demo apply -f - <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - {name: api, image: registry.invalid/api:1, volumeMounts: [{name: tls, mountPath: /tls}]}
      volumes:
      - {name: tls, secret: {secretName: api-tls}}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: selfsigned}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: demo-ca}
spec:
  isCA: true
  commonName: demo CA
  secretName: demo-ca
  issuerRef: {name: selfsigned, kind: Issuer}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: ca}
spec: {ca: {secretName: demo-ca}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: api-tls}
spec:
  secretName: api-tls
  dnsNames: [api.demo.test]
  issuerRef: {name: ca, kind: Issuer}
  secretTemplate:
    labels: {restart-at: "$WINDOW"}
    annotations: {restarter.io/timezone: UTC}
YAML
kubectl -n demo wait --for=condition=Ready certificate/api-tls --timeout=60s
wait_until 30 "restarter recorded a checksum on Secret api-tls" has_checksum secret/api-tls
echo "first issuance is the baseline; nothing restarted:"
kubectl -n demo get replicasets -l app=api
[[ "$(replica_sets api)" -eq 1 ]] || fail "the certificate's first issuance restarted Deployment api"
NOW="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
kubectl -n demo patch certificate api-tls --subresource=status --type=json -p "[{\"op\":\"add\",\"path\":\"/status/conditions/-\",
  \"value\":{\"type\":\"Issuing\",\"status\":\"True\",\"reason\":\"ManuallyTriggered\",\"message\":\"demo renewal\",\"lastTransitionTime\":\"$NOW\"}}]"
wait_until 60 "a second ReplicaSet of Deployment api after the renewal" at_least_replica_sets api 2
kubectl -n demo rollout status deployment/api --timeout=90s
kubectl -n demo get certificaterequests
kubectl -n demo get replicasets -l app=api

say "events"
events="$(kubectl -n demo get events --sort-by=.lastTimestamp -o custom-columns=OBJECT:.involvedObject.name,REASON:.reason,MESSAGE:.message)"
grep -E "OBJECT|ChangeDetected|RestartScheduled|Restarted" <<<"$events"
for object in shop api; do
  grep -qE "^$object +Restarted " <<<"$events" || fail "no Restarted Event on Deployment $object"
done
say "operator log (its pod on the real node)"
OPERATOR_POD="$(kubectl -n restarter get pods -l app.kubernetes.io/name=restarter -o jsonpath='{.items[0].metadata.name}')"
.venv/bin/restarter-cluster logs restarter "$OPERATOR_POD" restarter | grep -E "restarter|kopf.objects" | grep -v "succeeded" || true
