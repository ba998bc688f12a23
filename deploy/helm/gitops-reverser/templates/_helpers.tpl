{{/* Name of the chart, for the app.kubernetes.io/name label. */}}
{{- define "gitops-reverser.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of every resource, and the Service name the daemon registers its webhook with
(--webhook-service-name). A release named gitops-reverser gives the names of deploy/.
*/}}
{{- define "gitops-reverser.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gitops-reverser.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gitops-reverser.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gitops-reverser.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gitops-reverser.labels" -}}
helm.sh/chart: {{ include "gitops-reverser.chart" . }}
{{ include "gitops-reverser.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gitops-reverser
{{- end }}

{{- define "gitops-reverser.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gitops-reverser.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The certificate mode, checked once for every template that depends on it. */}}
{{- define "gitops-reverser.certMode" -}}
{{- $mode := .Values.webhook.certificate.mode }}
{{- if not (has $mode (list "self-managed" "cert-manager" "existing-secret")) }}
{{- fail (printf "webhook.certificate.mode must be self-managed, cert-manager or existing-secret, got %q" $mode) }}
{{- end }}
{{- $mode }}
{{- end }}

{{/*
The Secret with tls.crt, tls.key and ca.crt that the chart mounts for the webhook, or nothing
when the daemon manages its own certificate (or runs no webhook).
*/}}
{{- define "gitops-reverser.webhookCertSecret" -}}
{{- $mode := include "gitops-reverser.certMode" . }}
{{- if .Values.webhook.enabled }}
{{- if eq $mode "cert-manager" }}
{{- printf "%s-webhook-cert" (include "gitops-reverser.fullname" .) }}
{{- else if eq $mode "existing-secret" }}
{{- required "webhook.certificate.secretName is required with webhook.certificate.mode existing-secret" .Values.webhook.certificate.secretName }}
{{- end }}
{{- end }}
{{- end }}

{{/* Where the webhook's certificate Secret is mounted (--webhook-cert-dir). */}}
{{- define "gitops-reverser.webhookCertDir" -}}
/var/run/secrets/gitops-reverser/webhook-tls
{{- end }}

{{/* Where the config file is mounted (--config). */}}
{{- define "gitops-reverser.configDir" -}}
/etc/gitops-reverser
{{- end }}

{{/*
The daemon's config file: the `config` values, which must not set what the chart passes as
arguments (a flag overrides the file, so such a key would be silently ignored).
*/}}
{{- define "gitops-reverser.configFile" -}}
{{- range $key := list "namespace" "webhook-service-name" "install-crds" "enable-webhook" "webhook-cert-dir" "webhook-bind-address" "metrics-bind-address" "health-probe-bind-address" "receiver-bind-address" "ui-bind-address" "ui-auth" "leader-elect" "leader-election-namespace" "leader-election-id" "leader-election-lease-duration" "leader-election-renew-deadline" "leader-election-retry-period" "shards" "peer-address" "remote-allow-exec" "remote-allow-insecure" }}
{{- if hasKey $.Values.config $key }}
{{- fail (printf "config.%s is passed as an argument by the chart; set the value that owns it instead (see values.yaml)" $key) }}
{{- end }}
{{- end }}
{{- if hasKey .Values.config "pod-name" }}
{{- fail "config.pod-name is set by the chart from the Pod's own name (GITOPS_REVERSER_POD_NAME); each replica must label its own Pod" }}
{{- end }}
{{- toYaml .Values.config }}
{{- end }}

{{/* The Lease the replicas elect their leader with (--leader-election-id). */}}
{{- define "gitops-reverser.leaseName" -}}
{{- printf "%s-leader" (include "gitops-reverser.fullname" .) }}
{{- end }}

{{/*
The selector of the Services that must reach only the leader (the admission webhook, the
receivers): the Pods of the release, and with leader election only the one the leader labelled.
*/}}
{{- define "gitops-reverser.leaderSelectorLabels" -}}
{{ include "gitops-reverser.selectorLabels" . }}
{{- if .Values.leaderElection.enabled }}
configbutler.ai/leader: "true"
{{- end }}
{{- end }}

{{/* The number of replicas, after checking that several replicas have a leader election. */}}
{{- define "gitops-reverser.replicas" -}}
{{- if .Values.ha.enabled }}
{{- if not .Values.leaderElection.enabled }}
{{- fail "ha.enabled needs leaderElection.enabled: two replicas without a leader election Lease would both mirror the cluster and push to Git" }}
{{- end }}
{{- .Values.ha.replicas }}
{{- else }}
{{- 1 }}
{{- end }}
{{- end }}

{{/*
The operator page's sign-in (--ui-auth), checked once for every template that depends on it:
`token`, or `none`, which the daemon serves on loopback only, so nothing may route to it.
*/}}
{{- define "gitops-reverser.uiAuth" -}}
{{- $auth := .Values.ui.auth }}
{{- if not (has $auth (list "token" "none")) }}
{{- fail (printf "ui.auth must be token or none, got %q" $auth) }}
{{- end }}
{{- if and .Values.ui.enabled (eq $auth "none") .Values.ui.ingress.enabled }}
{{- fail "ui.auth none shows every destination and proposal without signing in, so the daemon serves the page on 127.0.0.1 only and nothing may route to it: set ui.ingress.enabled=false (reach the page with kubectl port-forward to the Pod) or ui.auth=token" }}
{{- end }}
{{- if and (index .Values.config "ui-cert-dir") (not .Values.ui.enabled) }}
{{- fail "config.ui-cert-dir is set but ui.enabled is false: the certificate is for the operator page" }}
{{- end }}
{{- $auth }}
{{- end }}

{{/*
The operator page's address (--ui-bind-address): every interface with auth token, loopback only
with auth none (reachable with kubectl port-forward to the Pod), empty (off) unless ui.enabled.
*/}}
{{- define "gitops-reverser.uiBindAddress" -}}
{{- $auth := include "gitops-reverser.uiAuth" . }}
{{- if .Values.ui.enabled }}
{{- if eq $auth "none" }}127.0.0.1{{ end }}:{{ .Values.ui.port }}
{{- end }}
{{- end }}

{{/* Whether the operator page is reachable from other Pods: a Service (and Ingress) for it. */}}
{{- define "gitops-reverser.uiServed" -}}
{{- if and .Values.ui.enabled (eq (include "gitops-reverser.uiAuth" .) "token") }}true{{ end }}
{{- end }}
