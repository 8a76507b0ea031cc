{{/*
The release's base name: the object names add -webhook, -webhook-tls, ...
(at most 23 characters more), so it is cut at 40 to stay a DNS label.
*/}}
{{- define "reload-agent.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "reload-agent.webhookName" -}}{{ include "reload-agent.fullname" . }}-webhook{{- end -}}
{{- define "reload-agent.certsName" -}}{{ include "reload-agent.fullname" . }}-webhook-certs{{- end -}}
{{- define "reload-agent.tlsSecret" -}}{{ include "reload-agent.fullname" . }}-webhook-tls{{- end -}}

{{/* The labels Helm's conventions add; the drift check ignores exactly these. */}}
{{- define "reload-agent.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end -}}

{{/* labels NAME: the name label (the selectors use it alone) and Helm's. */}}
{{- define "reload-agent.labels" -}}
app.kubernetes.io/name: {{ .name | quote }}
{{ include "reload-agent.helmLabels" .ctx }}
{{- end -}}

{{- define "reload-agent.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The pod security settings every pod of the chart runs with. */}}
{{- define "reload-agent.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end -}}
{{- define "reload-agent.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  privileged: false
  capabilities:
    drop: ["ALL"]
{{- end -}}

{{/* A hook's annotations: hook EVENTS, weight WEIGHT. Deleted when it
succeeded and before it is created again; a failed Job stays for a look. */}}
{{- define "reload-agent.hook" -}}
helm.sh/hook: {{ .events | quote }}
helm.sh/hook-weight: {{ .weight | quote }}
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end -}}

{{- define "reload-agent.validate" -}}
{{- if and .Values.webhook.podDisruptionBudget.enabled (lt (int .Values.webhook.replicas) (add1 (int .Values.webhook.podDisruptionBudget.minAvailable) | int)) -}}
{{- fail (printf "webhook.podDisruptionBudget.minAvailable (%v) must be below webhook.replicas (%v), or no node could ever be drained" .Values.webhook.podDisruptionBudget.minAvailable .Values.webhook.replicas) -}}
{{- end -}}
{{- end -}}
