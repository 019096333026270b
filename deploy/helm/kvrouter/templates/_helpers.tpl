{{- define "kvrouter.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kvrouter.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kvrouter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kvrouter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kvrouter.labels" -}}
{{ include "kvrouter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "kvrouter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kvrouter.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The namespace whose pods discovery watches. */}}
{{- define "kvrouter.discoveryNamespace" -}}
{{- default .Release.Namespace .Values.discovery.namespace -}}
{{- end -}}

{{/*
The Secret holding the picker's certificate ("" when none is mounted).
*/}}
{{- define "kvrouter.pickerSecret" -}}
{{- if and .Values.picker.enabled .Values.picker.tls.enabled -}}
{{- .Values.picker.tls.secretName -}}
{{- end -}}
{{- end }}

{{/*
The Secret holding the router hosts' mTLS certificate and CA ("" when none).
*/}}
{{- define "kvrouter.clusterSecret" -}}
{{- if .Values.cluster.enabled -}}
{{- .Values.cluster.tlsSecretName -}}
{{- end -}}
{{- end }}
