{{/*
CEL pieces of the ValidatingAdmissionPolicies (admission-policy.yaml). The keys allowed come
from files/written-keys.json, generated from the operator's key registry
(src/restarter/model/keys.py, WRITTEN).
*/}}

{{/* The registry of what restarter writes, as a dict of lists. */}}
{{- define "restarter.writtenKeys" -}}
{{- .Files.Get "files/written-keys.json" -}}
{{- end -}}

{{/* A list of strings as a CEL list literal. */}}
{{- define "restarter.celList" -}}
[{{- range $i, $item := . }}{{ if $i }}, {{ end }}{{ $item | squote }}{{ end -}}]
{{- end -}}

{{/*
True (as CEL) when the maps or objects .new and .old have the same fields with equal values,
those named in .except aside. dyn(): typed objects are iterated as maps of their set fields.
*/}}
{{- define "restarter.celSameExcept" -}}
(dyn({{ .new }}).all(k, k in {{ .except }} || (k in dyn({{ .old }}) && dyn({{ .new }})[k] == dyn({{ .old }})[k])) && dyn({{ .old }}).all(k, k in {{ .except }} || k in dyn({{ .new }})))
{{- end -}}

{{/* The keys of a map field present in .new or .old whose value differs (added, changed, removed). */}}
{{- define "restarter.celChangedKeys" -}}
{{ .new }}.filter(k, !(k in {{ .old }}) || {{ .old }}[k] != {{ .new }}[k]) + {{ .old }}.filter(k, !(k in {{ .new }}))
{{- end -}}

{{/* A metadata map (annotations, labels) of object and oldObject, {} when absent. */}}
{{- define "restarter.celVariablesOfMetadata" -}}
- name: newAnnotations
  expression: "variables.patched && has(object.metadata.annotations) ? dyn(object.metadata.annotations) : dyn({})"
- name: oldAnnotations
  expression: "variables.patched && has(oldObject.metadata.annotations) ? dyn(oldObject.metadata.annotations) : dyn({})"
- name: newLabels
  expression: "variables.patched && has(object.metadata.labels) ? dyn(object.metadata.labels) : dyn({})"
- name: oldLabels
  expression: "variables.patched && has(oldObject.metadata.labels) ? dyn(oldObject.metadata.labels) : dyn({})"
- name: newFinalizers
  expression: "variables.patched && has(object.metadata.finalizers) ? dyn(object.metadata.finalizers) : dyn([])"
- name: oldFinalizers
  expression: "variables.patched && has(oldObject.metadata.finalizers) ? dyn(oldObject.metadata.finalizers) : dyn([])"
- name: changedAnnotations
  expression: {{ include "restarter.celChangedKeys" (dict "new" "variables.newAnnotations" "old" "variables.oldAnnotations") | quote }}
- name: changedLabels
  expression: {{ include "restarter.celChangedKeys" (dict "new" "variables.newLabels" "old" "variables.oldLabels") | quote }}
# Metadata the apiserver itself changes on every write, or that no client sets.
- name: metadataKept
  expression: {{ include "restarter.celSameExcept" (dict "new" "object.metadata" "old" "oldObject.metadata" "except" "['annotations', 'labels', 'finalizers', 'managedFields', 'resourceVersion', 'generation']") | quote }}
{{- end -}}

{{/* What a request is about: source, workload (apps/v1), rollout, or other (a subresource too). */}}
{{- define "restarter.celVariablesOfTarget" -}}
# The subresource asked for ('' for none: the field is then absent).
- name: subResource
  expression: "has(request.subResource) ? request.subResource : ''"
- name: resource
  expression: "variables.subResource == '' ? request.resource.group + '/' + request.resource.resource : ''"
- name: target
  expression: >-
    variables.resource in ['/secrets', '/configmaps'] ? 'source' :
    variables.resource in ['apps/deployments', 'apps/statefulsets', 'apps/daemonsets'] ? 'workload' :
    variables.resource == 'argoproj.io/rollouts' ? 'rollout' : 'other'
{{- end -}}

{{/* Requests of one user, every resource and subresource but the review APIs (kubectl auth
can-i --as sends a SelfSubjectAccessReview as that user: it writes nothing). */}}
{{- define "restarter.policyMatch" -}}
failurePolicy: Fail
matchConstraints:
  resourceRules:
    - apiGroups: ["*"]
      apiVersions: ["*"]
      operations: [CREATE, UPDATE, DELETE, CONNECT]
      resources: ["*/*"]
  excludeResourceRules:
    - apiGroups: [authorization.k8s.io, authentication.k8s.io]
      apiVersions: ["*"]
      operations: [CREATE]
      resources: ["*"]
matchConditions:
  - name: user
    expression: {{ printf "request.userInfo.username == 'system:serviceaccount:%s:%s'" .namespace .name | quote }}
{{- end -}}

{{/* The binding: every namespace, or with `namespaces` those and the release's, as RBAC. */}}
{{- define "restarter.policyBinding" -}}
{{- $root := .root -}}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{ .name }}
  labels:
    {{- include "restarter.labels" $root | nindent 4 }}
spec:
  policyName: {{ .name }}
  # Deny refuses; Audit also records the refusal in the apiserver's audit log.
  validationActions: [Deny, Audit]
  {{- with $root.Values.namespaces }}
  matchResources:
    namespaceSelector:
      matchExpressions:
        - key: kubernetes.io/metadata.name
          operator: In
          values:
            {{- range (append . $root.Release.Namespace | uniq) }}
            - {{ . }}
            {{- end }}
  {{- end }}
{{- end -}}
