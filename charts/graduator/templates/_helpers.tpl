{{/* The release's full name, also the ServiceAccount's name by default. */}}
{{- define "graduator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "graduator.serviceAccountName" -}}
{{- default (include "graduator.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "graduator.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{- define "graduator.labels" -}}
{{ include "graduator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The ClusterRole name of the per-group migration rule of one group. */}}
{{- define "graduator.groupRoleName" -}}
{{- printf "%s-migrate-%s" (include "graduator.fullname" .root) .group -}}
{{- end -}}
