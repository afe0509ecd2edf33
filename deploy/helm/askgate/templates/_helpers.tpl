{{/* Names and labels shared by every object. */}}

{{- define "askgate.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "askgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "askgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "askgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "askgate.labels" -}}
{{ include "askgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The Secret holding credentials: the user's, or the chart's own. */}}
{{- define "askgate.authSecret" -}}
{{- .Values.auth.existingSecret | default (include "askgate.fullname" .) -}}
{{- end -}}

{{- define "askgate.redisSecret" -}}
{{- .Values.redis.existingSecret | default (include "askgate.fullname" .) -}}
{{- end -}}

{{/* What the values cannot mean, refused before anything is applied. */}}
{{- define "askgate.validate" -}}
{{- if not (has .Values.backend (list "sqlite" "memory" "redis")) -}}
{{- fail "backend must be sqlite, memory or redis" -}}
{{- end -}}
{{- if and (ne .Values.backend "redis") (or (gt (int .Values.replicaCount) 1) .Values.autoscaling.enabled) -}}
{{- fail (printf "backend %s keeps state in one process: set replicaCount 1 and autoscaling.enabled false, or use backend redis" .Values.backend) -}}
{{- end -}}
{{- if and (eq .Values.backend "redis") (not .Values.redis.url) (not .Values.redis.existingSecret) -}}
{{- fail "backend redis needs redis.url or redis.existingSecret" -}}
{{- end -}}
{{- if not (has .Values.auth.mode (list "none" "keys" "jwt")) -}}
{{- fail "auth.mode must be none, keys or jwt" -}}
{{- end -}}
{{- if and (eq .Values.auth.mode "jwt") (not .Values.auth.existingSecret) (lt (len .Values.auth.jwtSecret) 32) -}}
{{- fail "auth.mode jwt needs auth.jwtSecret (at least 32 bytes) or auth.existingSecret" -}}
{{- end -}}
{{- if and (eq .Values.auth.mode "keys") (not .Values.auth.existingSecret) (not .Values.auth.keysJson) -}}
{{- fail "auth.mode keys needs auth.keysJson or auth.existingSecret" -}}
{{- end -}}
{{- if and (eq .Values.auth.mode "none") (not .Values.auth.allowAnonymous) -}}
{{- fail "auth.mode none listens beyond loopback only with auth.allowAnonymous true (trials only)" -}}
{{- end -}}
{{- if not (has .Values.metrics.auth (list "anonymous" "token")) -}}
{{- fail "metrics.auth must be anonymous or token" -}}
{{- end -}}
{{- if and .Values.metrics.enabled (eq .Values.metrics.auth "token") (not .Values.metrics.tokenSecret) -}}
{{- fail "metrics.auth token needs metrics.tokenSecret (a Secret with key metrics-token)" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) -}}
{{- fail "tls.enabled needs tls.secretName" -}}
{{- end -}}
{{- end -}}

{{/* The health probe's command when TLS is on (kubelet's gRPC probes speak no TLS). */}}
{{- define "askgate.healthCommand" -}}
- /usr/local/bin/askgate
- health
- --addr
- https://localhost:50051
- --ca-file
- /etc/askgate/tls/ca.crt
{{- if .Values.tls.clientCA }}
- --cert
- /etc/askgate/tls/tls.crt
- --key
- /etc/askgate/tls/tls.key
{{- end }}
{{- end -}}
