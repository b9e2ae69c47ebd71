{{/* The release's objects are named after the chart unless the release
     already says sysray-agent. */}}
{{- define "sysray-agent.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sysray-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sysray-agent.labels" -}}
{{ include "sysray-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The node's socket of the chosen runtime. */}}
{{- define "sysray-agent.runtimeHostSocket" -}}
{{- if eq .Values.runtime.type "containerd" -}}
{{- .Values.runtime.containerdSocket -}}
{{- else if eq .Values.runtime.type "crio" -}}
{{- .Values.runtime.crioSocket -}}
{{- else -}}
{{- fail (printf "runtime.type %q: containerd or crio" .Values.runtime.type) -}}
{{- end -}}
{{- end -}}

{{/* Where the agent looks for that runtime's socket
     (internal/container/sources.go: ContainerdSocket, CRIOSocket). */}}
{{- define "sysray-agent.runtimeSocket" -}}
{{- if eq .Values.runtime.type "containerd" -}}
/run/containerd/containerd.sock
{{- else if eq .Values.runtime.type "crio" -}}
/var/run/crio/crio.sock
{{- else -}}
{{- fail (printf "runtime.type %q: containerd or crio" .Values.runtime.type) -}}
{{- end -}}
{{- end -}}
