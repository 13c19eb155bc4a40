{{/* The release's full name, at most 63 characters. */}}
{{- define "restarter.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selector labels: stable across upgrades. */}}
{{- define "restarter.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels on every object of the release. */}}
{{- define "restarter.labels" -}}
{{ include "restarter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "restarter.serviceAccountName" -}}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) -}}
{{- fail "serviceAccount.name is required when serviceAccount.create is false" -}}
{{- end -}}
{{- default (include "restarter.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The image by digest when image.digest is set (it wins over the tag), else by tag. */}}
{{- define "restarter.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* RBAC rules: exactly the API calls restarter and kopf make. */}}
{{- define "restarter.rules" -}}
# Watch labelled Secrets and ConfigMaps (server-side selector), and patch
# restarter.io/checksum onto them.
- apiGroups: [""]
  resources: [secrets, configmaps]
  verbs: [get, list, watch, patch]
# List and watch pod templates (the reference map), stamp pending marks with the pending
# label and the finalizer, restart (pod-template annotation) and remove them again.
- apiGroups: [apps]
  resources: [deployments, statefulsets, daemonsets]
  verbs: [get, list, watch, patch]
{{- if include "restarter.rollouts" . }}
# The same for Argo Rollouts (restarted through spec.restartAt).
- apiGroups: [argoproj.io]
  resources: [rollouts]
  verbs: [get, list, watch, patch]
{{- end }}
{{- if .Values.csi.enabled }}
# The Secrets Store CSI Driver's SecretProviderClasses (their restart-at window) and the
# object versions it reports per pod; read only.
- apiGroups: [secrets-store.csi.x-k8s.io]
  resources: [secretproviderclasses, secretproviderclasspodstatuses]
  verbs: [get, list, watch]
{{- end }}
# Events on sources and workloads (ChangeDetected, RestartScheduled, Restarted, warnings);
# kopf only ever creates them.
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- if or .Values.gates.blockingPodSelector (ne (toString .Values.waves.firstWave) "0") }}
# List pods by label selector: the blocking-pod gate's (metadata only), and the circuit
# breaker's read of a first wave's new pods (their container statuses).
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
{{- end }}
{{- if not .Values.namespaces }}
# List and watch Namespaces: each one's restarter.io/hold, kept for due restarts there
# (read once each when the watch is down), and with namespaceSelector, to act in those
# whose labels match.
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get, list, watch]
{{- end }}
{{- end -}}


{{/* True when Argo Rollouts are restarted: rollouts.enabled, or when null the CRD exists. */}}
{{- define "restarter.rollouts" -}}
{{- $enabled := .Values.rollouts.enabled -}}
{{- if kindIs "bool" $enabled -}}
{{- if $enabled }}true{{ end -}}
{{- else if lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" "rollouts.argoproj.io" -}}
true
{{- end -}}
{{- end -}}

{{/* True when the replicas elect the acting one through a Lease. */}}
{{- define "restarter.leaderElection" -}}
{{- if or .Values.leaderElection.enabled (gt (int .Values.replicaCount) 1) }}true{{ end -}}
{{- end -}}
