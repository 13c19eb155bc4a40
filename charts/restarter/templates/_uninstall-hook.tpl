{{/* The pre-delete hook's ServiceAccount, Roles and Job: one name for all of them. */}}
{{- define "restarter.uninstallHookName" -}}
{{- printf "%s-uninstall" (include "restarter.fullname" .) -}}
{{- end -}}

{{/* Hook annotations; RBAC gets a lower weight so it exists before the Job starts. */}}
{{- define "restarter.uninstallHookAnnotations" -}}
helm.sh/hook: pre-delete
helm.sh/hook-weight: {{ . | quote }}
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end -}}

{{/* RBAC rules in each watched namespace (or cluster-wide): exactly what release-finalizers calls. */}}
{{- define "restarter.uninstallHookWorkloadRules" -}}
# List the workloads that may carry restarter.io/finalizer, and remove it from them (a JSON
# patch of metadata.finalizers only: their restart marks stay).
- apiGroups: [apps]
  resources: [deployments, statefulsets, daemonsets]
  verbs: [list, patch]
{{- if include "restarter.rollouts" . }}
- apiGroups: [argoproj.io]
  resources: [rollouts]
  verbs: [list, patch]
{{- end }}
{{- end -}}
