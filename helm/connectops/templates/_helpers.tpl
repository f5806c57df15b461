{{/* Names, labels and small computed values shared by the templates. */}}

{{- define "connectops.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "connectops.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "connectops.selectorLabels" -}}
app.kubernetes.io/name: {{ include "connectops.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "connectops.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "connectops.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: connectops
{{- end -}}

{{- define "connectops.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "connectops.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "connectops.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "connectops.sparkServiceAccountName" -}}
{{- default (printf "%s-spark-check" (include "connectops.fullname" .) | trunc 63 | trimSuffix "-") .Values.sparkCheck.serviceAccount.name -}}
{{- end -}}

{{/* "true" when the operator watches every namespace (no watch.namespaces). */}}
{{- define "connectops.clusterwide" -}}
{{- if empty .Values.watch.namespaces -}}true{{- end -}}
{{- end -}}

{{/* "true" when the operator runs without leader election (--standalone). */}}
{{- define "connectops.standalone" -}}
{{- if not .Values.leaderElection.enabled -}}true{{- end -}}
{{- end -}}

{{/* The leader-election Lease's name (one per release). */}}
{{- define "connectops.leaseName" -}}
{{- printf "%s-leader" (include "connectops.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Namespaces where Spark checks run, as a JSON list. */}}
{{- define "connectops.sparkNamespaces" -}}
{{- if .Values.sparkCheck.namespaces -}}
{{- toJson .Values.sparkCheck.namespaces -}}
{{- else if .Values.watch.namespaces -}}
{{- toJson .Values.watch.namespaces -}}
{{- else -}}
{{- toJson (list .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{/* Refuse combinations that would run two un-coordinated operators. */}}
{{- define "connectops.validate" -}}
{{- $le := .Values.leaderElection -}}
{{- if and (gt (int .Values.replicas) 1) (not $le.enabled) -}}
{{- fail "replicas > 1 needs leaderElection.enabled=true: without it every replica would reconcile every object" -}}
{{- end -}}
{{- if $le.enabled -}}
{{- if le (int $le.leaseDurationSeconds) (int $le.renewDeadlineSeconds) -}}
{{- fail "leaderElection.renewDeadlineSeconds must be shorter than leaseDurationSeconds: a leader must be gone before its Lease expires" -}}
{{- end -}}
{{- if le (mulf (int $le.renewDeadlineSeconds) 1.0) (mulf (int $le.retryPeriodSeconds) 1.2) -}}
{{- fail "leaderElection.renewDeadlineSeconds must exceed 1.2 x retryPeriodSeconds" -}}
{{- end -}}
{{- end -}}
{{- end -}}
