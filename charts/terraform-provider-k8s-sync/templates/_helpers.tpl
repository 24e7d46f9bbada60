{{/* The name of every object: the release's. */}}
{{- define "k8s-sync.name" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "k8s-sync.labels" -}}
app.kubernetes.io/name: terraform-provider-k8s-sync
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "k8s-sync.selector" -}}
app.kubernetes.io/name: terraform-provider-k8s-sync
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The rules of what the pools read, for a Role or the ClusterRole. */}}
{{- define "k8s-sync.readRules" -}}
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: ["list", "watch"]
{{- if or .Values.rbac.pods .Values.readinessGates.enabled }}
# pod_health_checks = true, or readiness gates: the companion watches the
# Pods of those Services (k8s_readiness_gate reads each one it opens).
- apiGroups: [""]
  resources: ["pods"]
  verbs: [{{ if .Values.readinessGates.enabled }}"get", {{ end }}"list", "watch"]
{{- end }}
{{- if .Values.readinessGates.enabled }}
# Readiness gates: the apply (k8s_readiness_gate) sets the gate's condition
# of the pods that wait for the pool, and nothing else of a pod.
- apiGroups: [""]
  resources: ["pods/status"]
  verbs: ["patch"]
{{- end }}
{{- end -}}

{{/* The environment the CLI and the companion share. */}}
{{- define "k8s-sync.env" -}}
# .terraform of the configuration: written by the init container.
- name: TF_DATA_DIR
  value: /data/terraform
{{- include "k8s-sync.backendEnv" . }}
{{- end -}}

{{/* The backend's part of it: also the init container of each workspace's. */}}
{{- define "k8s-sync.backendEnv" -}}
{{- if .Values.backend.kubernetes }}
# The kubernetes backend connects with the pod's ServiceAccount.
- name: KUBE_IN_CLUSTER_CONFIG
  value: "true"
{{- end }}
{{- end -}}

{{/* Every container's: the "restricted" Pod Security Standard's. */}}
{{- define "k8s-sync.containerSecurityContext" -}}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
{{- end -}}
